"""``expect_normalized_cross_kappa_to_be_at_least``: the crowd works as an extension of the trusted pool."""

from __future__ import annotations

from typing import Any, ClassVar, Tuple  # noqa: UP035 (pydantic v1)

from great_expectations.compatibility import pydantic

from labelgate.gx._base import (
    IRR_LABELS,
    Check,
    IrrWeights,
    LabelGateExpectation,
    Threshold,
    fmt_kw,
    weights_phrase,
)


class ExpectNormalizedCrossKappaToBeAtLeast(LabelGateExpectation):
    r"""Expect normalized κx(crowd, trusted) to be at least ``min_value``.

    .. math::

        \tilde\kappa_x = \frac{\kappa_x(X, Y)}{\sqrt{IRR_X \cdot IRR_Y}}

    (xRR paper, Wong, Paritosh & Aroyo 2021, eq. 13, §3.4 and §5.3): a
    disattenuated agreement between the replications; about 1 means the crowd
    agrees with the trusted pool as much as each pool agrees with itself.
    Computed by :func:`labelgate.normalized_cross_kappa` on the items rated in
    both pools, with a joint item bootstrap.

    Parameters
    ----------
    min_value : float or suite parameter
        Threshold (required).
    irr : {"krippendorff_alpha", "fleiss_kappa", "conger_kappa", "gwet_ac", "janson_olsson_iota"}
        IRR used in the normalisation, default Krippendorff's α.
    weights : str or list of lists, optional
        Agreement weights (a weighting of the handbook by name, or a q x q matrix of credits in the order of
        ``categories``): both IRRs take them and κx the distance :math:`1 - w_{kl}`, so that the ratio compares
        like with like (:func:`labelgate.normalized_cross_kappa` with ``weights``). None (default): the level's
        distance. Not with ``irr="janson_olsson_iota"``.
    **common
        See :class:`~labelgate.gx.LabelGateExpectation`.

    Notes
    -----
    ``observed_value`` is normalized κx; ``details.components`` carries
    ``cross_kappa``, ``irr_crowd`` and ``irr_trusted`` with their intervals.
    NaN (e.g. a non-positive IRR product) fails with ``details.reason``.
    """

    irr: str = pydantic.Field("krippendorff_alpha", description="IRR in the normalisation.")
    weights: IrrWeights = pydantic.Field(None, description="The IRR's agreement weights (a handbook weighting).")
    min_value: Threshold = pydantic.Field(None, description="Minimum normalized kappa_x.")

    metric_dependencies: ClassVar[Tuple[str, ...]] = ("labelgate.table.normalized_cross_kappa",)  # noqa: UP006
    threshold_keys: ClassVar[Tuple[str, ...]] = ("min_value",)  # noqa: UP006
    required_thresholds: ClassVar[Tuple[str, ...]] = ("min_value",)  # noqa: UP006
    success_keys: ClassVar[Tuple[str, ...]] = (  # noqa: UP006
        *LabelGateExpectation.common_success_keys, "irr", "weights", "min_value")


    def _checks(self, m: dict[str, Any]) -> list[Check]:
        return [Check("min_value", "value", ">=", self._resolved("min_value"))]

    @classmethod
    def _sentence(cls, kw: dict[str, Any]) -> str:
        text = f"normalized κx ({cls._pools(kw)}) must be at least {fmt_kw(kw, 'min_value')}"
        if kw.get("irr") != "krippendorff_alpha" or kw.get("weights") is not None:
            text += f" (normalized by {IRR_LABELS.get(str(kw.get('irr')), kw.get('irr'))}{weights_phrase(kw)})"
        return text
