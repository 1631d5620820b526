"""Plain JSON values for the results store, artifacts and alerts: one conversion for the gate and the monitor."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from labelgate.errors import ParameterError


def to_jsonable(value: Any, path: str = "value") -> Any:
    """Convert ``value`` to plain JSON types: NaN/inf -> None, numpy scalars/arrays -> Python, dates -> ISO.

    Raises
    ------
    ParameterError
        A value cannot be represented in JSON; the message names its path (e.g. ``metrics.label.kappa``).

    Examples
    --------
    >>> to_jsonable({"a": (1.0, float("inf")), "b": {2: float("nan")}})
    {'a': [1.0, None], 'b': {'2': None}}
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)  # plain str, also for StrEnum members such as Reason
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, f"{path}[{i}]") for i, v in enumerate(value)]
    # numpy scalars and arrays without importing numpy; Estimate-like objects through their to_dict().
    for method in ("to_dict", "tolist"):
        if callable(getattr(value, method, None)):
            return to_jsonable(getattr(value, method)(), path)
    if callable(getattr(value, "item", None)):
        return to_jsonable(value.item(), path)
    raise ParameterError(f"{path}: a {type(value).__name__} cannot be stored as JSON in the results store.",
                         parameter=path, value=type(value).__name__)


def utc(us: int | None) -> str | None:
    """ISO 8601 (UTC) of microseconds since the epoch (None stays None).

    >>> utc(0)
    '1970-01-01T00:00:00+00:00'
    """
    return None if us is None else datetime.fromtimestamp(us / 1e6, tz=UTC).isoformat()
