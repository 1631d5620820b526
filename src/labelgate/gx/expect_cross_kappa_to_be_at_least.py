"""``expect_cross_kappa_to_be_at_least``: agreement between the crowd and the trusted pool."""

from __future__ import annotations

from typing import Any, ClassVar, Tuple  # noqa: UP035 (pydantic v1)

from great_expectations.compatibility import pydantic

from labelgate.gx._base import Check, LabelGateExpectation, Threshold, fmt_kw


class ExpectCrossKappaToBeAtLeast(LabelGateExpectation):
    r"""Expect the cross-replication reliability κx(crowd, trusted) to be at least ``min_value``.

    .. math::

        \kappa_x = 1 - \frac{d_o}{d_e}

    with :math:`d_o` the mean disagreement between a crowd and a trusted label
    of the same item and :math:`d_e` the same between labels of any two items
    (xRR paper, eq. 9-11, missing data allowed). The distance follows the
    level (nominal, Krippendorff ordinal, squared difference for
    interval/ratio). Computed by :func:`labelgate.cross_kappa`.

    Parameters
    ----------
    min_value : float or suite parameter
        Threshold (required).
    **common
        See :class:`~labelgate.gx.LabelGateExpectation`.

    Notes
    -----
    ``observed_value`` is κx; ``details.components`` carries ``d_o``, ``d_e``.
    """

    min_value: Threshold = pydantic.Field(None, description="Minimum kappa_x.")

    metric_dependencies: ClassVar[Tuple[str, ...]] = ("labelgate.table.cross_kappa",)  # noqa: UP006
    threshold_keys: ClassVar[Tuple[str, ...]] = ("min_value",)  # noqa: UP006
    required_thresholds: ClassVar[Tuple[str, ...]] = ("min_value",)  # noqa: UP006
    success_keys: ClassVar[Tuple[str, ...]] = (*LabelGateExpectation.common_success_keys, "min_value")  # noqa: UP006

    def _checks(self, m: dict[str, Any]) -> list[Check]:
        return [Check("min_value", "value", ">=", self._resolved("min_value"))]

    @classmethod
    def _sentence(cls, kw: dict[str, Any]) -> str:
        return f"κx ({cls._pools(kw)}) must be at least {fmt_kw(kw, 'min_value')}"
