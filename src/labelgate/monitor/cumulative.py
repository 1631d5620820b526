"""The cumulative side of a pass: update a stream's item, rater and co-rating-pair sums by the items the merge touched
(subtract their old rows, add the new ones), and the cumulative metrics computed from those sums."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import insert
from sqlalchemy.engine import Connection

from labelgate.monitor import episodes, rater_store
from labelgate.monitor.merging import Merged
from labelgate.monitor.rater_rows import refresh_rows
from labelgate.monitor.raters import RaterDelta, new_pairs, rater_deltas
from labelgate.monitor.series import series_record, series_row
from labelgate.monitor.state import Meta, Parts
from labelgate.monitor.stream_store import Stream
from labelgate.monitor.sums import estimates, laid_out, update_parts
from labelgate.monitor.touched import CROWD, States, Touched, item_states
from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.tables import windows_table


def update(conn: Connection, cfg: MonitorConfig, stream: Stream, merged: Merged) -> None:
    """Update the stream's item sums (in ``stream.sums``) and its stored rater and pair sums by a merge.

    A merge that removed judgements (replaced or deleted at the source) is applied in two steps: the removal is the
    inverse of adding the removed judgements to the kept ones (every sum, rater delta and pair tally negated), then
    the new judgements are added to the kept ones.
    """
    if not merged.removed.empty:
        _apply(conn, cfg, stream, merged.kept, merged.removed, removal=True)
    if not merged.new.empty:
        _apply(conn, cfg, stream, merged.kept, merged.new, removal=False)


def _apply(
    conn: Connection, cfg: MonitorConfig, stream: Stream, base: pd.DataFrame, change: pd.DataFrame, removal: bool
) -> None:
    """Add the judgements ``change`` to the items' judgements ``base``, or remove them (``removal``)."""
    meta = stream.meta
    touched = Touched.from_frames(base, change, (meta.center or 0.0) if meta.numeric else None)
    without, with_change = item_states(touched, meta.q, after=False), item_states(touched, meta.q, after=True)
    old, new = (with_change, without) if removal else (without, with_change)
    _grow_sizes(meta, new)
    parts = Parts(meta)
    stream.sums = laid_out(parts, stream.sums)
    update_parts(parts, stream.sums, old, new)
    pairs = new_pairs(touched)
    deltas = rater_deltas(touched, without, with_change, meta, pairs)
    if removal:
        pairs = pairs.assign(n=-pairs["n"], agree=-pairs["agree"])
        deltas = {pool: RaterDelta(delta.ids, -delta.delta) for pool, delta in deltas.items()}
    sid = stream.row["stream_id"]
    for pool, delta in deltas.items():
        rater_store.add_sums(conn, sid, pool, delta, meta)
        rater_store.add_pairs(conn, sid, pool, pairs.loc[pairs["pool"] == pool], cfg.monitor.raters.min_pair_items)
    refresh_rows(conn, cfg, stream.row, meta, {pool: set(delta.ids.tolist()) for pool, delta in deltas.items()})


def _grow_sizes(meta: Meta, after: States) -> None:
    """Append the crowd item sizes (2 or more ratings) not seen before: SPA keeps one column per size."""
    sizes = np.unique(after.counts[CROWD].sum(axis=1))
    for size in sizes[sizes >= 2].astype(int).tolist():
        if size not in meta.sizes:
            meta.sizes.append(size)


def measure(
    cfg: MonitorConfig, stream: Stream, question: Any
) -> tuple[dict[str, dict[str, Any]], dict[str, float | None]]:
    """The cumulative rows of the configured metrics (none before the stream has sums) and the gate thresholds of
    each metric (the baseline rule's from the cumulative trusted IRR)."""
    # no sums yet (nothing merged, perhaps no category known): no rows, and no Parts built on zero categories
    found = estimates(Parts(stream.meta), stream.sums, cfg.interval.ci) if stream.sums else {}
    irr_trusted = found["irr_trusted"]["value"] if found else None
    thresholds = episodes.thresholds(cfg, question, irr_trusted)
    r = stream.row
    rows: dict[str, dict[str, Any]] = {
        name: series_row(question.name, name, "cumulative", r["first_ts"], r["watermark"], found[name],
                         thresholds.get(name))
        for name in (cfg.monitor.metrics if found else [])
    }
    return rows, thresholds


def record(
    conn: Connection, monitor: str, stream: Stream, rows: dict[str, dict[str, Any]], pass_id: str
) -> None:
    """Store the cumulative rows of this pass in the series; none while the stream holds no crowd judgement (its
    rows would have no time of the data: the trusted replication alone is no point of the series)."""
    r = stream.row
    if r["first_ts"] is None or r["watermark"] is None:
        return
    records = [
        series_record(monitor, row["question"], name, "cumulative", None, r["first_ts"], r["watermark"], row, pass_id)
        for name, row in rows.items()
    ]
    if records:
        conn.execute(insert(windows_table), records)
