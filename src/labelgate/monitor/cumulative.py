"""The monitor's cumulative state: one question's stream of maintained sums (items, raters, co-rating pairs), updated
by subtracting and adding only the touched items, and the cumulative metrics computed from those sums."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import and_, bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection

from labelgate.metrics.diagnostics import RaterSums, block_width, evaluate_pairs, rater_rows_from_sums
from labelgate.monitor import episodes
from labelgate.monitor.config import MonitorConfig
from labelgate.monitor.raters import expand_rater, new_pairs, rater_deltas, rater_layout, unpack_rater
from labelgate.monitor.schema import (
    keys_table,
    pairs_table,
    raters_table,
    windows_table,
)
from labelgate.monitor.sources import utc
from labelgate.monitor.state import (
    CROWD,
    PARTS,
    Meta,
    Parts,
    PartState,
    Touched,
    item_states,
    part_estimate,
    update_parts,
)
from labelgate.monitor.window_pass import CHUNK as _CHUNK
from labelgate.monitor.window_pass import series_record


@dataclass
class Stream:
    """One question's stream: its stored row, what its statistics depend on, and the maintained sums."""

    row: dict[str, Any]
    meta: Meta
    parts: dict[str, PartState]
    explicit: bool
    changed: bool = False
    summary: dict[str, Any] = field(default_factory=dict)


class Cumulative:
    """The cumulative sums and rows of one monitor (``name``) under its configuration."""

    def __init__(self, cfg: MonitorConfig, name: str) -> None:
        self.cfg = cfg
        self.name = name

    def update_sums(
        self, conn: Connection, stream: Stream, existing: pd.DataFrame, new: pd.DataFrame
    ) -> None:
        meta = stream.meta
        both = pd.concat(
            [existing.assign(new=False), new[existing.columns].assign(new=True)], ignore_index=True
        )
        item, _ = pd.factorize(both["item_id"])
        center = meta.center if meta.center is not None else 0.0
        values = both["value"].to_numpy(dtype=np.float64) - center if meta.numeric else np.zeros(len(both))
        touched = Touched(
            item.astype(np.int64),
            both["pool"].to_numpy(np.int64),
            both["rater_id"].to_numpy(object),
            both["code"].to_numpy(np.int64),
            values,
            both["new"].to_numpy(bool),
            int(item.max()) + 1,
        )
        old_states, new_states = (
            item_states(touched, meta.q, after=False),
            item_states(touched, meta.q, after=True),
        )
        sizes = np.unique(new_states.counts[CROWD].sum(axis=1))
        for size in sizes[sizes >= 2].astype(int).tolist():
            if size not in meta.sizes:
                meta.sizes.append(size)
        parts = Parts(meta)
        states = {
            name: (
                stream.parts[name].expand(parts.widths[name])
                if name in stream.parts
                else PartState.empty(name, parts.widths[name])
            )
            for name in PARTS
        }
        update_parts(parts, states, old_states, new_states)
        stream.parts = states
        self._update_raters(conn, stream, touched, old_states, new_states)

    # ------------------------------------------------------------------------------------------ raters
    def _update_raters(self, conn: Connection, stream: Stream, touched: Touched, old: Any, new: Any) -> None:
        meta, sid = stream.meta, stream.row["stream_id"]
        deltas = rater_deltas(touched, old, new, meta)
        length, _ = rater_layout(meta.kind, meta.q)
        pairs = new_pairs(touched)
        for pool, delta in deltas.items():
            index = {rid: k for k, rid in enumerate(delta.ids.tolist())}
            mine = pairs.loc[pairs["pool"] == pool]
            for column in ("rater_a", "rater_b"):
                pos = mine[column].map(index).to_numpy(np.int64)
                np.add.at(delta.delta[:, length - 2], pos, mine["agree"].to_numpy(np.float64))
                np.add.at(delta.delta[:, length - 1], pos, mine["n"].to_numpy(np.float64))
            stored = self._load_rater_sums(conn, sid, pool, delta.ids.tolist(), meta)
            records_new, records_old = [], []
            for rid, change in zip(delta.ids.tolist(), delta.delta, strict=True):
                if rid in stored:
                    records_old.append(
                        {
                            "b_sid": sid,
                            "b_pool": pool,
                            "b_rid": rid,
                            "q": meta.q,
                            "sums": (stored[rid] + change).tobytes(),
                        }
                    )
                else:
                    records_new.append(
                        {
                            "stream_id": sid,
                            "pool": pool,
                            "rater_id": rid,
                            "q": meta.q,
                            "sums": change.tobytes(),
                            "row": None,
                            "flagged": False,
                        }
                    )
            r = raters_table
            if records_old:
                conn.execute(_keyed_rater_update(q=bindparam("q"), sums=bindparam("sums")), records_old)
            if records_new:
                conn.execute(insert(r), records_new)
            self._update_pairs(conn, sid, pool, mine)
        touched_ids = {pool: set(delta.ids.tolist()) for pool, delta in deltas.items()}
        self._refresh_rows(conn, stream, touched_ids)

    def _load_rater_sums(
        self,
        conn: Connection,
        sid: int,
        pool: int,
        ids: list[str],
        meta: Meta,
    ) -> dict[str, np.ndarray]:
        r = raters_table
        out = {}
        for start in range(0, len(ids), _CHUNK):
            rows = conn.execute(
                select(r.c.rater_id, r.c.q, r.c.sums).where(
                    r.c.stream_id == sid, r.c.pool == pool, r.c.rater_id.in_(ids[start : start + _CHUNK])
                )
            ).all()
            for rid, q, blob in rows:
                out[rid] = expand_rater(
                    np.frombuffer(blob, dtype=np.float64).copy(), meta.kind, int(q), meta.q
                )
        return out

    def _update_pairs(self, conn: Connection, sid: int, pool: int, delta: pd.DataFrame) -> None:
        if delta.empty:
            return
        p = pairs_table
        keys = list(zip(delta["rater_a"], delta["rater_b"], strict=True))
        stored: dict[tuple[str, str], tuple[int, int]] = {}
        # Join with a temporary key table: SQLite does not use the whole primary key for a row-value IN (...),
        # and one query per key costs more than the join (one primary-key lookup per key).
        keys_table.create(conn, checkfirst=True)
        conn.execute(delete(keys_table))
        conn.execute(insert(keys_table), [{"a": a, "b": b} for a, b in keys])
        k = keys_table
        rows = conn.execute(
            select(p.c.rater_a, p.c.rater_b, p.c.n, p.c.agree).join_from(
                k, p, and_(p.c.stream_id == sid, p.c.pool == pool, p.c.rater_a == k.c.a, p.c.rater_b == k.c.b)
            )
        ).all()
        stored.update({(ra, rb): (n, ag) for ra, rb, n, ag in rows})
        conn.execute(delete(keys_table))
        minimum = self.cfg.monitor.raters.min_pair_items
        updates, inserts = [], []
        for (a, b), n, agree in zip(keys, delta["n"].astype(int), delta["agree"].astype(int), strict=True):
            if (a, b) in stored:
                n_old, agree_old = stored[(a, b)]
                updates.append(
                    {
                        "b_sid": sid,
                        "b_pool": pool,
                        "b_a": a,
                        "b_b": b,
                        "n": n_old + n,
                        "agree": agree_old + agree,
                        "candidate": n_old + n >= minimum,
                    }
                )
            else:
                inserts.append(
                    {
                        "stream_id": sid,
                        "pool": pool,
                        "rater_a": a,
                        "rater_b": b,
                        "n": n,
                        "agree": agree,
                        "candidate": n >= minimum,
                    }
                )
        if updates:
            conn.execute(
                update(p)
                .where(
                    and_(
                        p.c.stream_id == bindparam("b_sid"),
                        p.c.pool == bindparam("b_pool"),
                        p.c.rater_a == bindparam("b_a"),
                        p.c.rater_b == bindparam("b_b"),
                    )
                )
                .values(n=bindparam("n"), agree=bindparam("agree"), candidate=bindparam("candidate")),
                updates,
            )
        if inserts:
            conn.execute(insert(p), inserts)

    def _refresh_rows(self, conn: Connection, stream: Stream, touched: dict[int, set[str]]) -> None:
        """Recompute the per-rater rows of touched raters and of raters in or leaving a collusion flag."""
        meta, sid, checks = stream.meta, stream.row["stream_id"], self.cfg.monitor.raters
        p, r = pairs_table, raters_table
        candidates = pd.DataFrame(
            conn.execute(
                select(p.c.pool, p.c.rater_a, p.c.rater_b, p.c.n, p.c.agree).where(
                    p.c.stream_id == sid, p.c.candidate.is_(True)
                )
            ).all(),
            columns=["pool", "rater_a", "rater_b", "n", "agree"],
        )
        flagged_before = conn.execute(
            select(r.c.pool, r.c.rater_id).where(r.c.stream_id == sid, r.c.flagged.is_(True))
        ).all()
        affected = {pool: set(ids) for pool, ids in touched.items()}
        for pool, rid in flagged_before:
            affected.setdefault(pool, set()).add(rid)
        partners: dict[int, dict[str, list[str]]] = {}
        k = block_width(meta.kind, meta.q)
        for pool, group in candidates.groupby("pool"):
            names = sorted(set(group["rater_a"]) | set(group["rater_b"]))
            sums = self._load_rater_sums(conn, sid, int(pool), names, meta)
            agree = {rid: unpack_rater(v, k)["pair_agree"] for rid, v in sums.items()}
            total = {rid: unpack_rater(v, k)["pair_total"] for rid, v in sums.items()}
            test = evaluate_pairs(
                group["n"].to_numpy(float),
                group["agree"].to_numpy(float),
                group["rater_a"].map(agree).to_numpy(float),
                group["rater_a"].map(total).to_numpy(float),
                group["rater_b"].map(agree).to_numpy(float),
                group["rater_b"].map(total).to_numpy(float),
                margin=checks.collusion_margin,
                min_items=checks.min_pair_items,
            )
            found: dict[str, list[str]] = {}
            for a, b in group.loc[test["flag"], ["rater_a", "rater_b"]].itertuples(index=False):
                found.setdefault(a, []).append(b)
                found.setdefault(b, []).append(a)
            partners[int(pool)] = found
            affected.setdefault(int(pool), set()).update(found)
        for pool, ids in affected.items():
            self._write_rows(conn, stream, pool, sorted(ids), partners.get(pool, {}))

    def _write_rows(
        self, conn: Connection, stream: Stream, pool: int, ids: list[str], partners: dict[str, list[str]]
    ) -> None:
        if not ids:
            return
        meta, sid = stream.meta, stream.row["stream_id"]
        sums = self._load_rater_sums(conn, sid, pool, ids, meta)
        ids = [rid for rid in ids if rid in sums]
        k = block_width(meta.kind, meta.q)
        parts = [unpack_rater(sums[rid], k) for rid in ids]
        rater_sums = RaterSums(
            n_ratings=np.asarray([x["n_ratings"] for x in parts]),
            trusted=np.asarray([x["trusted"] for x in parts]).reshape(-1, k),
            trusted_second=np.asarray([x["trusted_second"] for x in parts]).reshape(-1, k, k),
            trusted_n=np.asarray([x["trusted_n"] for x in parts]),
            loo=np.asarray([x["loo"] for x in parts]).reshape(-1, k),
            loo_second=np.asarray([x["loo_second"] for x in parts]).reshape(-1, k, k),
            loo_n=np.asarray([x["loo_n"] for x in parts]),
            pair_agree=np.asarray([x["pair_agree"] for x in parts]),
            pair_total=np.asarray([x["pair_total"] for x in parts]),
        )
        checks = self.cfg.monitor.raters
        pool_name = self.cfg.pools.crowd if pool == CROWD else self.cfg.pools.trusted
        rows = rater_rows_from_sums(
            ids,
            rater_sums,
            kind=meta.kind,
            q=meta.q,
            pool_name=pool_name,
            ci=self.cfg.interval.ci,
            partners={g: partners.get(rid, []) for g, rid in enumerate(ids)},
            min_agreement=checks.min_agreement,
            min_shared_items=checks.min_shared_items,
        )
        question = stream.row["question"]
        records = [
            {
                "b_sid": sid,
                "b_pool": pool,
                "b_rid": rid,
                "row": {**row, "question": question},
                "flagged": bool(row["partners"]),
            }
            for rid, row in zip(ids, rows, strict=True)
        ]
        conn.execute(_keyed_rater_update(row=bindparam("row"), flagged=bindparam("flagged")), records)

    # ------------------------------------------------------------------------------------------ metrics
    def rows(self, stream: Stream, question: Any) -> dict[str, dict[str, Any]]:
        if not stream.parts:
            return {}
        parts = Parts(stream.meta)
        level = self.cfg.interval.ci
        estimates = {
            name: part_estimate(parts, stream.parts[name].expand(parts.widths[name]), level) for name in PARTS
        }
        thresholds = episodes.thresholds(self.cfg, question, estimates["irr_trusted"]["value"])
        r = stream.row
        out: dict[str, dict[str, Any]] = {}
        for name in self.cfg.monitor.metrics:
            est = estimates[name]
            out[name] = {
                "question": question.name,
                "metric": name,
                "window_start": utc(r["first_ts"]),
                "window_end": utc(r["watermark"]),
                "scope": "cumulative",
                "value": _num(est["value"]),
                "ci_low": _num(est["ci_low"]),
                "ci_high": _num(est["ci_high"]),
                "n_items": est["n_items"],
                "n_ratings": est["n_ratings"],
                "threshold": thresholds.get(name),
            }
        return out

    def measure(
        self,
        conn: Connection,
        stream: Stream,
        question: Any,
        pass_id: str,
    ) -> dict[str, dict[str, Any]]:
        rows = self.rows(stream, question)
        r = stream.row
        records = [series_record(self.name, question.name, name, "cumulative", None, r["first_ts"] or 0,
                                 r["watermark"] or 0, row, pass_id)
                   for name, row in rows.items()]
        if records:
            conn.execute(insert(windows_table), records)
        return rows


def _num(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _keyed_rater_update(**values: Any) -> Any:
    """An executemany UPDATE of rater rows keyed by the bind parameters ``b_sid``, ``b_pool``, ``b_rid``."""
    r = raters_table
    key = and_(r.c.stream_id == bindparam("b_sid"), r.c.pool == bindparam("b_pool"),
               r.c.rater_id == bindparam("b_rid"))
    return update(r).where(key).values(**values)
