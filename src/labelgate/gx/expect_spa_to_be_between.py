"""``expect_spa_to_be_between``: sparse probability of agreement of the crowd pool in a range."""

from __future__ import annotations

from typing import Any, ClassVar, Tuple  # noqa: UP035 (pydantic v1)

from great_expectations.compatibility import pydantic

from labelgate.errors import check_option
from labelgate.gx._base import Check, LabelGateExpectation, Threshold, fmt_kw
from labelgate.gx._metrics import WEIGHTINGS


class ExpectSpaToBeBetween(LabelGateExpectation):
    r"""Expect the SPA of the crowd pool to lie in [``min_value``, ``max_value``].

    .. math::

        \bar P_{spa} = \frac{\sum_i k_i \hat P_i}{\sum_i k_i}, \qquad
        \hat P_i = \frac{\sum_c n_{ic}(n_{ic} - 1)}{n_i (n_i - 1)}

    (Nørregaard & Derczynski, SPA paper §5), computed by :func:`labelgate.spa`
    on the crowd pool only (the trusted pool, when present, only enters the
    coverage figure). A too-high SPA can flag trivial items or collusion, so
    an upper bound is allowed.

    Parameters
    ----------
    min_value, max_value : float or suite parameter
        Bounds, inclusive; at least one is required.
    weighting : {"flat", "annotations", "annotations_m1", "edges", "inv_var", "inv_var_class"}
        Item weights :math:`k_i`, default ``"annotations_m1"``.
    **common
        See :class:`~labelgate.gx.LabelGateExpectation`. With
        ``use_ci_bound`` the interval must lie inside the range (its lower
        end is compared with ``min_value`` and its upper end with ``max_value``).
    """

    weighting: str = pydantic.Field("annotations_m1", description="SPA item weighting.")
    min_value: Threshold = pydantic.Field(None, description="Minimum SPA, inclusive.")
    max_value: Threshold = pydantic.Field(None, description="Maximum SPA, inclusive.")

    needs_trusted: ClassVar[bool] = False
    metric_dependencies: ClassVar[Tuple[str, ...]] = ("labelgate.table.spa",)  # noqa: UP006
    threshold_keys: ClassVar[Tuple[str, ...]] = ("min_value", "max_value")  # noqa: UP006
    required_thresholds: ClassVar[Tuple[str, ...]] = ("min_value", "max_value")  # noqa: UP006
    success_keys: ClassVar[Tuple[str, ...]] = (  # noqa: UP006
        *LabelGateExpectation.common_success_keys, "weighting", "min_value", "max_value")

    @pydantic.validator("weighting")
    def _check_weighting(cls, v: str) -> str:  # noqa: N805
        check_option(v, WEIGHTINGS, "weighting", cls._type_name())
        return v

    @pydantic.root_validator(skip_on_failure=True)
    def _check_thresholds(cls, values: dict[str, Any]) -> dict[str, Any]:  # noqa: N805
        cls._check_order(values, "min_value", "max_value")
        return values

    def _checks(self, m: dict[str, Any]) -> list[Check]:
        checks = []
        if self.min_value is not None:
            checks.append(Check("min_value", "value", ">=", self._resolved("min_value")))
        if self.max_value is not None:
            checks.append(Check("max_value", "value", "<=", self._resolved("max_value")))
        return checks

    @classmethod
    def _sentence(cls, kw: dict[str, Any]) -> str:
        head = f"SPA ({kw.get('weighting')} weighting) of the {kw.get('crowd_pool')} pool must be"
        low, high = kw.get("min_value"), kw.get("max_value")
        if low is not None and high is not None:
            return f"{head} between {fmt_kw(kw, 'min_value')} and {fmt_kw(kw, 'max_value')}"
        if low is not None:
            return f"{head} at least {fmt_kw(kw, 'min_value')}"
        return f"{head} at most {fmt_kw(kw, 'max_value')}"
