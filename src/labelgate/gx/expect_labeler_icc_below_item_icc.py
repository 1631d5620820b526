"""``expect_labeler_icc_below_item_icc``: labels vary more with the item than with the labeler."""

from __future__ import annotations

from typing import Any, ClassVar, Tuple  # noqa: UP035 (pydantic v1)

from great_expectations.compatibility import pydantic

from labelgate.errors import ParameterError
from labelgate.gx._base import (
    Check,
    LabelGateExpectation,
    Threshold,
    _finite,
    digits_for,
    fmt_kw,
    with_ci,
)


class ExpectLabelerIccBelowItemIcc(LabelGateExpectation):
    r"""Expect the labeler ICC of the crowd pool to be below its item ICC (by more than ``margin``).

    With the crossed random-effects model :math:`y_{ij} = \mu + a_i + b_j +
    e_{ij}` (item :math:`a_i`, labeler :math:`b_j`),

    .. math::

        ICC_{item} = \frac{\sigma^2_a}{\sigma^2_a + \sigma^2_b + \sigma^2_e}, \qquad
        ICC_{labeler} = \frac{\sigma^2_b}{\sigma^2_a + \sigma^2_b + \sigma^2_e},

    and success when :math:`ICC_{item} - ICC_{labeler} > \text{margin}`
    (xCC/ICC blog, "Labeler ICC"): labels should depend on what is labelled
    more than on who labels it. The variance components come from
    :mod:`labelgate.metrics.variance` (method of moments for sparse crossed
    designs).

    Only numeric labels have variance components: levels ``interval`` /
    ``ratio``, or a binary label (two categories at any level; the shares do
    not depend on which category is coded 1). Other labels (nominal or
    ordinal with more than two categories) fail with a reason instead of a
    number computed on category ranks.

    Parameters
    ----------
    margin : float >= 0 or suite parameter, default 0
        Required gap :math:`ICC_{item} - ICC_{labeler}`.
    **common
        See :class:`~labelgate.gx.LabelGateExpectation`. The trusted
        pool is not used (except for the coverage figure). With
        ``use_ci_bound`` the gap is judged on the lower end of its own
        interval: both ICCs come from the same bootstrap replicates (two-way
        item x rater bootstrap of :func:`labelgate.metrics.variance.item_icc`).

    Notes
    -----
    ``observed_value`` is the labeler ICC; ``details.components`` holds
    ``item_icc``, ``labeler_icc``, ``gap`` (with their intervals) and
    ``variance_components`` (``item``, ``rater``, ``residual``).
    """

    margin: Threshold = pydantic.Field(0.0, description="Required gap item ICC - labeler ICC.")

    needs_trusted: ClassVar[bool] = False
    metric_dependencies: ClassVar[Tuple[str, ...]] = ("labelgate.table.icc_gap",)  # noqa: UP006
    threshold_keys: ClassVar[Tuple[str, ...]] = ("margin",)  # noqa: UP006
    required_thresholds: ClassVar[Tuple[str, ...]] = ("margin",)  # noqa: UP006
    success_keys: ClassVar[Tuple[str, ...]] = (*LabelGateExpectation.common_success_keys, "margin")  # noqa: UP006

    @pydantic.root_validator(skip_on_failure=True)
    def _check_thresholds(cls, values: dict[str, Any]) -> dict[str, Any]:  # noqa: N805
        v = values.get("margin")
        if _finite(v) and v < 0:
            raise ParameterError(f"The 'margin' parameter of {cls._type_name()} must be >= 0; got {v!r}.",
                                 parameter="margin", value=v)
        return values

    def _checks(self, m: dict[str, Any]) -> list[Check]:
        return [Check("margin", "gap", ">", float(self._resolved("margin")))]

    @classmethod
    def _sentence(cls, kw: dict[str, Any]) -> str:
        text = f"labeler ICC of the {kw.get('crowd_pool')} pool must be below its item ICC"
        if kw.get("margin") not in (None, 0, 0.0):
            text += f" by more than {fmt_kw(kw, 'margin')}"
        return text

    @classmethod
    def _observed(cls, details: dict[str, Any], observed: Any) -> str:
        comp = details.get("components") or {}
        level = details.get("ci_level")
        digits = digits_for([comp.get("gap")], [c.get("threshold") for c in details.get("checks") or []])
        labeler = with_ci(observed, details.get("ci_low"), details.get("ci_high"), level, digits)
        item = with_ci(comp.get("item_icc"), comp.get("item_icc_ci_low"), comp.get("item_icc_ci_high"), level,
                       digits)
        return f"{labeler} vs item ICC {item}"
