"""``expect_irr_at_or_above_trusted_baseline``: the crowd agrees with itself about as well as the trusted pool."""

from __future__ import annotations

from typing import Any, ClassVar, Tuple  # noqa: UP035 (pydantic v1)

from great_expectations.compatibility import pydantic

from labelgate.errors import ParameterError
from labelgate.gx._base import (
    IRR_LABELS,
    Check,
    IrrWeights,
    LabelGateExpectation,
    Threshold,
    _finite,
    digits_for,
    fmt_kw,
    fmt_threshold,
    weights_phrase,
    with_ci,
)


class ExpectIrrAtOrAboveTrustedBaseline(LabelGateExpectation):
    r"""Expect the crowd's IRR to be at or above the trusted pool's IRR, up to a tolerance.

    Success when

    .. math::

        IRR_{crowd} \ge IRR_{trusted} - \text{tolerance}
        \quad\text{and/or}\quad
        IRR_{crowd} \ge \text{min\_ratio} \cdot IRR_{trusted},

    and, when ``max_excess`` is set, :math:`IRR_{crowd} \le IRR_{trusted} +
    \text{max\_excess}`: a crowd agreeing far more than the experts suggests
    collusion or oversimplified guidelines (xRR paper §5.2). Both IRRs are
    computed on the items rated in both pools, so item difficulty cancels, and
    the item bootstrap resamples those items jointly: the interval of the
    difference (and of the ratio) accounts for the correlation of the IRRs.

    Parameters
    ----------
    irr : {"krippendorff_alpha", "fleiss_kappa", "conger_kappa", "gwet_ac", "janson_olsson_iota"}
        The IRR, default Krippendorff's α.
    weights : str or list of lists, optional
        The IRR's agreement weights: a weighting of the handbook by name (``"identity"``, ``"linear"``,
        ``"quadratic"``, ``"ordinal"``, ``"radical"``, ``"ratio"``, ``"circular"``, ``"bipolar"``; ``"nominal"``
        is ``"identity"``) or a q x q matrix of credits in the order of ``categories``; both IRRs are then
        ``lg.krippendorff_alpha(r, weights=...)`` (or the ``irr``'s function with those weights). None (default):
        the coefficient's default (α: the distance of ``level``). Not with ``irr="janson_olsson_iota"``.
    tolerance : float >= 0 or suite parameter, optional
        Allowed shortfall :math:`IRR_{trusted} - IRR_{crowd}`. When neither
        ``tolerance`` nor ``min_ratio`` is set the rule is
        :math:`IRR_{crowd} \ge IRR_{trusted}`. When both are set, both apply.
    min_ratio : float > 0 or suite parameter, optional
        Minimum :math:`IRR_{crowd} / IRR_{trusted}` (NaN, hence failure, unless
        :math:`IRR_{trusted} > 0`).
    max_excess : float >= 0 or suite parameter, optional
        Maximum :math:`IRR_{crowd} - IRR_{trusted}`.
    **common
        See :class:`~labelgate.gx.LabelGateExpectation`.

    Notes
    -----
    ``observed_value`` is :math:`IRR_{crowd}` on the common items (equal to
    the core metric on the crowd pool when every crowd item has trusted
    labels). ``details.components`` holds ``irr_trusted``, ``difference``
    and ``ratio`` with their intervals.
    """

    irr: str = pydantic.Field("krippendorff_alpha", description="The IRR metric.")
    weights: IrrWeights = pydantic.Field(None, description="The IRR's agreement weights (a handbook weighting).")
    tolerance: Threshold = pydantic.Field(None, description="Allowed shortfall of the crowd IRR.")
    min_ratio: Threshold = pydantic.Field(None, description="Minimum crowd / trusted IRR ratio.")
    max_excess: Threshold = pydantic.Field(None, description="Maximum excess of the crowd IRR.")

    metric_dependencies: ClassVar[Tuple[str, ...]] = ("labelgate.table.irr_comparison",)  # noqa: UP006
    threshold_keys: ClassVar[Tuple[str, ...]] = ("tolerance", "min_ratio", "max_excess")  # noqa: UP006
    success_keys: ClassVar[Tuple[str, ...]] = (  # noqa: UP006
        *LabelGateExpectation.common_success_keys, "irr", "weights", "tolerance", "min_ratio", "max_excess")


    @pydantic.root_validator(skip_on_failure=True)
    def _check_thresholds(cls, values: dict[str, Any]) -> dict[str, Any]:  # noqa: N805
        for name, positive in (("tolerance", False), ("min_ratio", True), ("max_excess", False)):
            v = values.get(name)
            if _finite(v) and (v <= 0 if positive else v < 0):
                raise ParameterError(f"The {name!r} parameter of {cls._type_name()} must be "
                                     f"{'> 0' if positive else '>= 0'}; got {v!r}.", parameter=name, value=v)
        return values

    def _checks(self, m: dict[str, Any]) -> list[Check]:
        checks = []
        if self.tolerance is not None or self.min_ratio is None:
            tolerance = self._resolved("tolerance") if self.tolerance is not None else 0.0
            checks.append(Check("tolerance", "difference", ">=", -float(tolerance)))
        if self.min_ratio is not None:
            checks.append(Check("min_ratio", "ratio", ">=", float(self._resolved("min_ratio"))))
        if self.max_excess is not None:
            checks.append(Check("max_excess", "difference", "<=", float(self._resolved("max_excess"))))
        return checks

    @classmethod
    def _sentence(cls, kw: dict[str, Any]) -> str:
        label = IRR_LABELS.get(str(kw.get("irr")), str(kw.get("irr"))) + weights_phrase(kw)
        trusted = f"{label} of the {kw.get('trusted_pool')} pool"
        rules = []
        if kw.get("tolerance") is not None or kw.get("min_ratio") is None:
            tol = kw.get("tolerance")
            rules.append(trusted + (f" − {fmt_kw(kw, 'tolerance')}" if tol not in (None, 0, 0.0) else ""))
        if kw.get("min_ratio") is not None:
            rules.append(f"{fmt_kw(kw, 'min_ratio')} × {trusted}")
        text = f"{label} of the {kw.get('crowd_pool')} pool must be at least " + " and at least ".join(rules)
        if kw.get("max_excess") is not None:
            text += (f", and at most {trusted} + {fmt_threshold(kw.get('max_excess'))} "
                     "(a far higher crowd IRR suggests collusion or oversimplified guidelines)")
        return text

    @classmethod
    def _observed(cls, details: dict[str, Any], observed: Any) -> str:
        comp = details.get("components") or {}
        level = details.get("ci_level")
        digits = digits_for([comp.get("difference")], [c.get("threshold") for c in details.get("checks") or []])
        crowd = with_ci(observed, details.get("ci_low"), details.get("ci_high"), level, digits)
        trusted = with_ci(comp.get("irr_trusted"), comp.get("irr_trusted_ci_low"),
                          comp.get("irr_trusted_ci_high"), level, digits)
        diff = with_ci(comp.get("difference"), comp.get("difference_ci_low"), comp.get("difference_ci_high"),
                       level, digits)
        text = f"{crowd} vs trusted {trusted}; difference {diff}"
        if any(c.get("statistic") == "ratio" for c in details.get("checks") or []):
            ratio = with_ci(comp.get("ratio"), comp.get("ratio_ci_low"), comp.get("ratio_ci_high"), level, digits)
            text += f"; ratio {ratio}"
        return text
