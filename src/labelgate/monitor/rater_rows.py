"""The per-rater diagnostic rows of a stream (what ``history`` reports): the collusion test on the candidate pairs and
the rows of the raters a pass touched, flagged or unflagged, recomputed from their stored sums.

A pass rewrites only the rows of the raters it touched, so the stored rows carry each rater's p-value but no
``low_agreement`` flag: :func:`judge_stored` flags them across every rater of the pool and question when they are
read (the family of the Benjamini-Hochberg procedure is the whole pool, as in the gate)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from labelgate.metrics.diagnostics import block_width, evaluate_pairs, judge_rows, rater_rows_from_sums
from labelgate.monitor.rater_store import candidate_pairs, keyed_rater_update, load_sums
from labelgate.monitor.raters import stack_raters, unpack_rater
from labelgate.monitor.state import Meta
from labelgate.monitor.touched import CROWD
from labelgate.pipeline.config import MonitorConfig, RaterChecks
from labelgate.pipeline.tables import raters_table


def refresh_rows(
    conn: Connection, cfg: MonitorConfig, stream_row: dict[str, Any], meta: Meta, touched: dict[int, set[str]]
) -> None:
    """Recompute the rows of the ``touched`` raters (per pool) and of raters entering or leaving a collusion flag.

    ``stream_row`` is the stored stream (its ``stream_id`` and ``question``).
    """
    sid = stream_row["stream_id"]
    r = raters_table
    flagged_before = conn.execute(
        select(r.c.pool, r.c.rater_id).where(r.c.stream_id == sid, r.c.flagged.is_(True))
    ).all()
    affected = {pool: set(ids) for pool, ids in touched.items()}
    for pool, rid in flagged_before:
        affected.setdefault(pool, set()).add(rid)
    partners = _collusion_partners(conn, cfg, sid, meta)
    for pool, found in partners.items():
        affected.setdefault(pool, set()).update(found)
    for pool, ids in affected.items():
        _write_rows(conn, cfg, stream_row, meta, pool, sorted(ids), partners.get(pool, {}))


def _collusion_partners(conn: Connection, cfg: MonitorConfig, sid: int, meta: Meta) -> dict[int, dict[str, list[str]]]:
    """Per pool, the partners of each rater in a candidate pair that the collusion test flags."""
    checks = cfg.monitor.raters
    candidates = candidate_pairs(conn, sid)
    k = block_width(meta.kind, meta.q)
    partners: dict[int, dict[str, list[str]]] = {}
    for pool, group in candidates.groupby("pool"):
        names = sorted(set(group["rater_a"]) | set(group["rater_b"]))
        tallies = {rid: unpack_rater(v, k) for rid, v in load_sums(conn, sid, int(pool), names, meta).items()}
        agree = {rid: t["pair_agree"] for rid, t in tallies.items()}
        total = {rid: t["pair_total"] for rid, t in tallies.items()}
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
    return partners


def _write_rows(
    conn: Connection,
    cfg: MonitorConfig,
    stream_row: dict[str, Any],
    meta: Meta,
    pool: int,
    ids: list[str],
    partners: dict[str, list[str]],
) -> None:
    sid = stream_row["stream_id"]
    sums = load_sums(conn, sid, pool, ids, meta)
    ids = [rid for rid in ids if rid in sums]
    if not ids:
        return
    checks = cfg.monitor.raters
    rows = rater_rows_from_sums(
        ids,
        stack_raters([sums[rid] for rid in ids], block_width(meta.kind, meta.q)),
        kind=meta.kind,
        q=meta.q,
        pool_name=cfg.pools.crowd if pool == CROWD else cfg.pools.trusted,
        ci=cfg.interval.ci,
        partners={g: partners.get(rid, []) for g, rid in enumerate(ids)},
        min_agreement=checks.min_agreement,
        min_shared_items=checks.min_shared_items,
        effect=checks.effect,
        fdr=None,  # judged across the whole pool when read (judge_stored)
    )
    question = stream_row["question"]
    records = [
        {"b_sid": sid, "b_pool": pool, "b_rid": rid, "row": {**row, "question": question},
         "flagged": bool(row["partners"])}
        for rid, row in zip(ids, rows, strict=True)
    ]
    conn.execute(keyed_rater_update(row=bindparam("row"), flagged=bindparam("flagged")), records)


def judge_stored(rows: Iterable[dict[str, Any]], checks: RaterChecks) -> list[dict[str, Any]]:
    """The stored rows, judged ``low_agreement`` per (question, pool) by
    :func:`labelgate.metrics.diagnostics.judge_rows`.

    Rows keep their order; rows of an older store (no ``p_value`` key) are left as they are.
    """
    rows = [dict(r) for r in rows]
    families: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for row in rows:
        if "p_value" in row:
            families.setdefault((row.get("question"), row.get("pool")), []).append(row)
    for family in families.values():
        judge_rows(family, fdr=checks.fdr, power=checks.power, min_items=checks.min_shared_items)
    return rows
