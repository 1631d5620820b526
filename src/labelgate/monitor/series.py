"""Rows of a monitor's series: a window's or the cumulative value of one metric, as the pass summary shows it and as
the windows table stores it."""

from __future__ import annotations

from typing import Any

from labelgate.pipeline.serialize import utc

NUMBERS = ("value", "ci_low", "ci_high", "n_items", "n_ratings")


def series_row(
    question: str, metric: str, scope: str, start: int | None, end: int | None, numbers: dict[str, Any],
    threshold: float | None,
) -> dict[str, Any]:
    """The summary row of one metric (times ISO 8601); ``numbers`` holds :data:`NUMBERS`."""
    return {"question": question, "metric": metric, "window_start": utc(start), "window_end": utc(end),
            "scope": scope, **{k: numbers[k] for k in NUMBERS}, "threshold": threshold}


def series_record(monitor: str, question: str, metric: str, scope: str, index: int | None, start: int, end: int,
                  row: dict[str, Any], pass_id: str) -> dict[str, Any]:
    """One row of the stored series (times in microseconds) from a summary row."""
    return {"monitor": monitor, "question": question, "metric": metric, "scope": scope, "window_index": index,
            "window_start": start, "window_end": end, "pass_id": pass_id,
            **{k: row[k] for k in (*NUMBERS, "threshold")}}
