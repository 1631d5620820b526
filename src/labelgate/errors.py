"""LabelGate's exception hierarchy.

Every error raised on bad input or bad parameters is a :class:`LabelGateError`
carrying a machine-readable ``code`` (one of :class:`Reason`) and the offending
``column`` / ``row`` / ``value`` where they are known, so that callers (the GX
expectations, the gate flow, the CLI) can store and display the reason without
parsing messages.

Degenerate but valid data (one category used, no pairable item) is *not* an
error: metrics return an :class:`~labelgate.Estimate` whose value is NaN and
whose ``reason`` says why. See ``docs/degenerate-input.md``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Reason(StrEnum):
    """Reason codes shared by errors and NaN estimates."""

    # input errors
    MISSING_COLUMN = "missing_column"
    MISSING_ID = "missing_id"
    MISSING_VALUE = "missing_value"
    UNKNOWN_CATEGORY = "unknown_category"
    NON_NUMERIC_VALUE = "non_numeric_value"
    DUPLICATE_JUDGEMENT = "duplicate_judgement"
    EMPTY_INPUT = "empty_input"
    UNSORTABLE_CATEGORIES = "unsortable_categories"
    TOO_MANY_CATEGORIES = "too_many_categories"
    UNREADABLE_INPUT = "unreadable_input"
    MISSING_SETTING = "missing_setting"
    OUTSIDE_ROOTS = "outside_roots"
    # design errors
    NO_COMMON_ITEMS = "no_common_items"
    INCOMPATIBLE_RATINGS = "incompatible_ratings"
    WRONG_RATER_COUNT = "wrong_rater_count"
    INCOMPLETE_DESIGN = "incomplete_design"
    # parameter errors
    INVALID_PARAMETER = "invalid_parameter"
    # a run's faults
    EXPECTATION_FAILED = "expectation_failed"
    # reasons for a NaN estimate (not raised)
    NO_PAIRABLE_ITEMS = "no_pairable_items"
    NO_EXPECTED_DISAGREEMENT = "no_expected_disagreement"
    NONPOSITIVE_IRR_PRODUCT = "nonpositive_irr_product"
    CATEGORY_NOT_PAIRED = "category_not_paired"
    NO_VARIANCE = "no_variance"


class LabelGateError(Exception):
    """Base class of every LabelGate error.

    Parameters
    ----------
    message : str
        Human-readable message naming the column / row / value at fault.
    code : Reason
        Machine-readable reason code.
    **context
        Extra structured fields (``column``, ``row``, ``value``, ``parameter``...).
    """

    default_code: Reason = Reason.INVALID_PARAMETER

    def __init__(self, message: str, code: Reason | None = None, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.context = context

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"code", "message", **context}`` with JSON-friendly values."""
        return {"code": self.code.value, "message": self.message,
                **{k: _jsonable(v) for k, v in self.context.items()}}


class InputError(LabelGateError, ValueError):
    """The ratings data are malformed (missing column, bad value, duplicate...)."""

    default_code = Reason.EMPTY_INPUT


class DesignError(LabelGateError, ValueError):
    """The data are valid but the design does not fit the requested metric."""

    default_code = Reason.INCOMPATIBLE_RATINGS


class ParameterError(LabelGateError, ValueError):
    """A parameter of a public function is invalid."""

    default_code = Reason.INVALID_PARAMETER


def check_option(value: Any, allowed: tuple[Any, ...], parameter: str, function: str) -> None:
    """Raise :class:`ParameterError` unless ``value`` is one of ``allowed``.

    The message follows scikit-learn's convention, e.g. "The 'weights'
    parameter of percent_agreement must be one of 'identity', 'linear',
    'quadratic'; got 'x'."
    """
    if value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise ParameterError(
            f"The {parameter!r} parameter of {function} must be one of {options}; got {value!r}.",
            parameter=parameter, value=value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)
