"""A question's stream as stored: its row in the streams table (sequence counter, time range, windows closed), what its
statistics depend on (:class:`~labelgate.monitor.state.Meta`) and its maintained sums; loading and saving it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from labelgate.core.labels import label_number, plain_label
from labelgate.errors import InputError, Reason
from labelgate.monitor.state import Meta
from labelgate.monitor.sums import PartState
from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.tables import streams_table
from labelgate.pipeline.units import unit_label


@dataclass
class Stream:
    """One question's stream: its stored row, what its statistics depend on, and the maintained sums per part.

    ``explicit``: the categories are configured (they do not grow with the labels). ``unrecorded``: judgements were
    merged since the last point of the cumulative series (by a transaction that does not measure: a chunk of a SQL
    source with more to come), stored so that a pass stopped before it measured still records that point on the rerun.
    """

    row: dict[str, Any]
    meta: Meta
    sums: dict[str, PartState]
    explicit: bool
    unrecorded: bool = False


def load_stream(conn: Connection, cfg: MonitorConfig, monitor: str, question: Any) -> Stream:
    """The stream of ``question`` in ``monitor`` (created when new); refuses a changed level or IRR."""
    s = streams_table
    stored = (
        conn.execute(select(s).where(s.c.monitor == monitor, s.c.question == question.name)).mappings().first()
    )
    row: dict[str, Any]
    if stored is None:
        row = {
            "monitor": monitor,
            "question": question.name,
            "level": question.level,
            # a set question's categories are the elements its sets may hold; the stream's are the sets seen
            "categories": [] if question.level == "set" else
            [_plain_category(c, question.level) for c in (question.categories or [])] + _unit_label(question),
            "center": None,
            "n_seq": 0,
            "first_ts": None,
            "watermark": None,
            "closed_until": None,
            "state": {},
            "updated_at": datetime.now(UTC),
        }
        row["stream_id"] = conn.execute(insert(s).values(**row)).inserted_primary_key[0]  # type: ignore[index]
    else:
        row = dict(stored)
    if row["level"] != question.level:
        raise InputError(
            f"Question {question.name!r} was monitored as {row['level']} and is now configured "
            f"as {question.level}; use another monitor name.",
            Reason.INCOMPATIBLE_RATINGS,
        )
    state = row["state"] or {}
    sets = question.level == "set"
    meta = Meta(
        level=question.level,
        # label sets are stored as lists of texts (JSON): read back in their canonical form, the core's keying
        categories=[plain_label(c) for c in row["categories"]] if sets else list(row["categories"]),
        center=row["center"],
        irr=cfg.monitor.irr,
        weights=cfg.monitor.weights,
        weighting=cfg.monitor.spa_weighting,
        sizes=list(state.get("sizes", [])),
        distance=question.distance,
        elements=[str(c) for c in question.categories] if sets and question.categories is not None else None,
    )
    if sets and state.get("distance", meta.distance) != meta.distance and state.get("parts"):
        raise InputError(
            f"Question {question.name!r} was monitored with the {state['distance']} distance and is now configured "
            f"with {meta.distance}; its stored sums do not apply. Use another monitor name.",
            Reason.INCOMPATIBLE_RATINGS,
        )
    if state.get("irr", meta.irr) != meta.irr:
        raise InputError(
            f"The monitor's IRR changed from {state['irr']!r} to {meta.irr!r}; its stored sums "
            "do not apply. Use another monitor name.",
            Reason.INCOMPATIBLE_RATINGS,
        )
    if state.get("weights") != meta.weights and state.get("parts"):
        raise InputError(
            f"The monitor's IRR weights changed from {state.get('weights')!r} to {meta.weights!r}; its stored sums "
            "do not apply. Use another monitor name.",
            Reason.INCOMPATIBLE_RATINGS,
        )
    sums = {name: PartState.from_json(name, data) for name, data in state.get("parts", {}).items()}
    return Stream(row, meta, sums, explicit=question.categories is not None and not sets,
                  unrecorded=bool(state.get("unrecorded", False)))


def save_stream(conn: Connection, stream: Stream) -> None:
    """Write back the stream's row, categories, centre and sums."""
    s, r = streams_table, stream.row
    state: dict[str, Any] = {
        "sizes": stream.meta.sizes,
        "irr": stream.meta.irr,
        "weights": stream.meta.weights,
        **({"distance": stream.meta.distance} if stream.meta.level == "set" else {}),
        "parts": {name: p.to_json() for name, p in stream.sums.items()},
    }
    if stream.unrecorded:  # only while set: a stream's stored state is otherwise what it was before the flag
        state["unrecorded"] = True
    conn.execute(
        update(s)
        .where(s.c.stream_id == r["stream_id"])
        .values(
            categories=stream.meta.categories,
            center=stream.meta.center,
            n_seq=r["n_seq"],
            first_ts=r["first_ts"],
            watermark=r["watermark"],
            closed_until=r["closed_until"],
            state=state,
            updated_at=datetime.now(UTC),
        )
    )


def _unit_label(question: Any) -> list[str]:
    """A span / box question's listed categories take the label of a unit nobody marked (``O`` / ``none``), as the
    gate's (:func:`labelgate.pipeline.units.unit_config`); none when its categories are not listed (they grow)."""
    extra = unit_label(question)
    return [extra] if extra is not None and question.categories and extra not in question.categories else []


def _plain_category(value: Any, level: str) -> Any:
    """A configured category as stored (the keying rule of :mod:`labelgate.core.labels`)."""
    if level in ("interval", "ratio") and label_number(value) is None:
        raise InputError(
            f"Category {value!r} of a numeric question is not a number.", Reason.NON_NUMERIC_VALUE
        )
    return plain_label(value)
