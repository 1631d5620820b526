"""Which annotations of a Label Studio project a reading selects: some tasks, a data manager view, a time range.

A :class:`Selection` is what a gate's batch or a project URL's query (:func:`selection_of_url`) asks for; the reader
(:mod:`.reader`) applies it on the server where it can (task ids, a view, a filter on the tasks' ``updated_at``) and
checks the time range again on every annotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from labelgate.errors import InputError, Reason

_TIME_FIELDS = ("updated_at", "created_at")


@dataclass(frozen=True)
class Selection:
    """Which annotations of a project are read.

    Attributes
    ----------
    tasks : tuple of int, optional
        Only these tasks.
    view : int, optional
        Only the tasks of this data manager view (a tab of the project's data manager: its filters).
    after, before : datetime, optional
        Only the annotations whose ``time_field`` is in ``[after, before)`` (timezone-aware; naive is UTC).
    time_field : {"updated_at", "created_at"}
    trusted_any_time : bool, default False
        The time range selects the crowd's annotations only, and the trusted annotations of the tasks it selects are
        read whenever they were made (the gate's batch: new crowd work against the existing trusted pool). Tasks
        without a crowd annotation in the range are left out.
    """

    tasks: tuple[int, ...] | None = None
    view: int | None = None
    after: datetime | None = None
    before: datetime | None = None
    time_field: str = "updated_at"
    trusted_any_time: bool = False

    def __post_init__(self) -> None:
        if self.time_field not in _TIME_FIELDS:
            raise InputError(f"The time field of a Label Studio selection is one of {list(_TIME_FIELDS)}, not "
                             f"{self.time_field!r}.", Reason.INVALID_PARAMETER, value=self.time_field)
        if self.after is not None and self.before is not None and self.after >= self.before:
            raise InputError(f"The Label Studio time range is empty: after {self.after.isoformat()} is not before "
                             f"{self.before.isoformat()}.", Reason.INVALID_PARAMETER)

    @property
    def timed(self) -> bool:
        """Whether a time range is set."""
        return self.after is not None or self.before is not None

    def in_range(self, annotation: Mapping[str, Any]) -> bool:
        """Whether the annotation's time is in the range (always, without one)."""
        if not self.timed:
            return True
        stamp = as_time(annotation.get(self.time_field), f"{self.time_field} of annotation {annotation.get('id')}")
        return (self.after is None or stamp >= self.after) and (self.before is None or stamp < self.before)

    def describe(self) -> str:
        """The selection in words (for the report's source name)."""
        parts = [f"tasks {list(self.tasks)[:5]}{'...' if len(self.tasks) > 5 else ''}"] if self.tasks else []
        parts += [f"view {self.view}"] if self.view is not None else []
        if self.timed:
            parts.append(f"{self.time_field} in [{self.after.isoformat() if self.after else '-inf'}, "
                         f"{self.before.isoformat() if self.before else 'now'})")
        return ", ".join(parts)


def as_time(value: Any, what: str) -> datetime:
    """A timezone-aware time from an ISO text or a datetime (naive means UTC).

    Examples
    --------
    >>> as_time("2026-01-02T03:04:05.123456Z", "x").isoformat()
    '2026-01-02T03:04:05.123456+00:00'
    """
    if isinstance(value, datetime):
        stamp = value
    else:
        try:
            stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"The {what} is {value!r}, not an ISO time.", Reason.INVALID_PARAMETER,
                             value=str(value)) from None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def selection_of_url(query: str) -> Selection:
    """The selection a project URL's query asks for: ``tasks=1,2,3``, ``view=N`` (or the data manager's ``tab=N``),
    ``annotated_after=ISO``, ``annotated_before=ISO``, ``time_field=created_at``.

    Examples
    --------
    >>> selection_of_url("tasks=3,1&annotated_after=2026-01-01T00:00:00Z").describe()
    'tasks [1, 3], updated_at in [2026-01-01T00:00:00+00:00, now)'
    """
    params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    unknown = set(params) - {"tasks", "view", "tab", "annotated_after", "annotated_before", "time_field"}
    if unknown:
        raise InputError(f"A Label Studio project URL's query may hold tasks, view (or tab), annotated_after, "
                         f"annotated_before and time_field; not {sorted(unknown)}.", Reason.INVALID_PARAMETER)
    try:
        tasks = tuple(sorted({int(t) for t in params["tasks"].split(",") if t.strip()})) if "tasks" in params else None
        view = params.get("view") or params.get("tab")
        view_id = int(view) if view else None
    except ValueError:
        raise InputError(f"The tasks and the view of a Label Studio project URL are integers; got {params}.",
                         Reason.INVALID_PARAMETER) from None
    return Selection(tasks=tasks, view=view_id,
                     after=as_time(params["annotated_after"], "annotated_after") if "annotated_after" in params else
                     None,
                     before=as_time(params["annotated_before"], "annotated_before") if "annotated_before" in params
                     else None, time_field=params.get("time_field") or "updated_at")
