"""The monitor's per-rater sums: their layout (agreement with the trusted pool, leave-one-out agreement, bias, pair
tallies), the deltas a pass adds for the touched items, and the new co-rating pairs (arithmetic only; the stored
sums are in :mod:`labelgate.monitor.rater_store`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from labelgate.metrics.diagnostics import Kind, RaterSums, block_width, rater_item_rows
from labelgate.monitor.state import Meta
from labelgate.monitor.sums import block_positions
from labelgate.monitor.touched import CROWD, TRUSTED, States, Touched


def rater_length(k: int) -> int:
    """Length of a rater's sums vector for kappa blocks of width ``k``.

    Vector: ``[n_ratings, trusted S (k), trusted M (k*k), trusted n, loo S (k), loo M (k*k), loo n,
    pair_agree, pair_total]``.
    """
    return 1 + 2 * (k + k * k + 1) + 2


def unpack_rater(vec: np.ndarray, k: int) -> dict[str, Any]:
    """Split a rater sums vector into its named parts."""
    at = 1
    out: dict[str, Any] = {"n_ratings": vec[0]}
    for name in ("trusted", "loo"):
        out[name] = vec[at : at + k]
        out[f"{name}_second"] = vec[at + k : at + k + k * k].reshape(k, k)
        out[f"{name}_n"] = vec[at + k + k * k]
        at += k + k * k + 1
    out["pair_agree"], out["pair_total"] = vec[at], vec[at + 1]
    return out


def stack_raters(vectors: list[np.ndarray], k: int) -> RaterSums:
    """The sums of several raters (their vectors, kappa blocks of width ``k``) as the diagnostics read them."""
    parts = [unpack_rater(v, k) for v in vectors]

    def stacked(name: str, *shape: int) -> np.ndarray:
        return np.asarray([x[name] for x in parts]).reshape(-1, *shape)

    return RaterSums(
        n_ratings=stacked("n_ratings"),
        trusted=stacked("trusted", k),
        trusted_second=stacked("trusted_second", k, k),
        trusted_n=stacked("trusted_n"),
        loo=stacked("loo", k),
        loo_second=stacked("loo_second", k, k),
        loo_n=stacked("loo_n"),
        pair_agree=stacked("pair_agree"),
        pair_total=stacked("pair_total"),
    )


def expand_rater(vec: np.ndarray, kind: Kind, q_old: int, q_new: int) -> np.ndarray:
    """A rater vector laid out for ``q_new`` categories (nominal, and label sets' matrix kind, whose blocks have the
    nominal layout; other kinds have fixed widths)."""
    if q_old == q_new or kind not in ("nominal", "matrix"):
        return vec
    k_old, k_new = block_width(kind, q_old), block_width(kind, q_new)
    pos = block_positions([1, q_old, q_old], [1, q_new, q_new])
    old, new = unpack_rater(vec, k_old), np.zeros(rater_length(k_new))
    new[0] = old["n_ratings"]
    at = 1
    for name in ("trusted", "loo"):
        s = np.zeros(k_new)
        s[pos] = old[name]
        m = np.zeros((k_new, k_new))
        m[np.ix_(pos, pos)] = old[f"{name}_second"]
        new[at : at + k_new], new[at + k_new : at + k_new + k_new * k_new] = s, m.ravel()
        new[at + k_new + k_new * k_new] = old[f"{name}_n"]
        at += k_new + k_new * k_new + 1
    new[at], new[at + 1] = old["pair_agree"], old["pair_total"]
    return new


@dataclass
class RaterDelta:
    """Changes of the per-rater sums of one pool: ``ids`` (R,), ``delta`` (R, L)."""

    ids: np.ndarray
    delta: np.ndarray


def rater_deltas(t: Touched, old: States, new: States, meta: Meta, pairs: pd.DataFrame) -> dict[int, RaterDelta]:
    """Per pool, the change of each touched rater's sums: kappa rows vs trusted and vs co-raters, and the tallies of
    the new co-rating ``pairs`` (:func:`new_pairs`) the rater is in."""
    kind, q = meta.kind, meta.q
    k = block_width(kind, q)
    out = {}
    for pool in (CROWD, TRUSTED):
        rows = np.flatnonzero(t.pool == pool)
        if rows.size == 0:
            continue
        ids, rater = np.unique(t.rater[rows], return_inverse=True)
        delta = np.zeros((ids.size, rater_length(k)))
        delta[:, 0] = np.bincount(rater, weights=t.new[rows].astype(np.float64), minlength=ids.size)
        at = 1
        for target in ("trusted", "loo"):
            if target == "trusted" and pool == TRUSTED:
                at += k + k * k + 1
                continue
            for sign, states, keep in ((1.0, new, np.ones(rows.size, dtype=bool)), (-1.0, old, ~t.new[rows])):
                sub = rows[keep]
                other = _other(states, t, sub, pool, target, kind)
                block = rater_item_rows(kind, t.code[sub], other, q, t.value[sub])
                present = (other[:, 0] if kind == "moments" else other.sum(axis=1)) > 0
                group = rater[keep]
                s = np.zeros((ids.size, k))
                np.add.at(s, group, block)
                m = np.zeros((ids.size, k, k))
                np.add.at(m, group, block[:, :, None] * block[:, None, :])
                delta[:, at : at + k] += sign * s
                delta[:, at + k : at + k + k * k] += sign * m.reshape(ids.size, -1)
                delta[:, at + k + k * k] += sign * np.bincount(
                    group, weights=present.astype(np.float64), minlength=ids.size
                )
            at += k + k * k + 1
        _add_pair_tallies(delta, ids, pairs.loc[pairs["pool"] == pool])
        out[pool] = RaterDelta(ids, delta)
    return out


def _add_pair_tallies(delta: np.ndarray, ids: np.ndarray, pairs: pd.DataFrame) -> None:
    """Add the agreements and counts of the new pairs to the last two entries of both raters' deltas."""
    index = {rid: k for k, rid in enumerate(ids.tolist())}
    for column in ("rater_a", "rater_b"):
        pos = pairs[column].map(index).to_numpy(np.int64)
        np.add.at(delta[:, -2], pos, pairs["agree"].to_numpy(np.float64))
        np.add.at(delta[:, -1], pos, pairs["n"].to_numpy(np.float64))


def _other(states: States, t: Touched, rows: np.ndarray, pool: int, target: str, kind: Kind) -> np.ndarray:
    items = t.item[rows]
    if target == "trusted":
        return (states.moments[TRUSTED] if kind == "moments" else states.counts[TRUSTED])[items]
    if kind == "moments":
        x = t.value[rows]
        return states.moments[pool][items] - np.column_stack([np.ones_like(x), x, x * x])
    other = states.counts[pool][items].copy()
    other[np.arange(rows.size), t.code[rows]] -= 1.0
    return other


def new_pairs(t: Touched) -> pd.DataFrame:
    """Co-rating pairs formed by the new judgements: columns ``pool, rater_a, rater_b, n, agree``.

    A pair is counted once per item, when its later judgement arrives (``rater_a < rater_b`` as text).
    """
    order = np.lexsort((t.rater.astype(str), t.item, t.pool))
    pool, item, rater, code, new = t.pool[order], t.item[order], t.rater[order], t.code[order], t.new[order]
    frames = []
    d = 1
    while d < item.size:
        same = (item[d:] == item[:-d]) & (pool[d:] == pool[:-d])
        if not same.any():
            break
        pick = same & (new[d:] | new[:-d])
        if pick.any():
            a, b = rater[:-d][pick].astype(str), rater[d:][pick].astype(str)
            first = a <= b
            frames.append(
                pd.DataFrame(
                    {
                        "pool": pool[:-d][pick],
                        "rater_a": np.where(first, a, b),
                        "rater_b": np.where(first, b, a),
                        "agree": (code[:-d][pick] == code[d:][pick]).astype(np.int64),
                    }
                )
            )
        d += 1
    if not frames:
        return pd.DataFrame({"pool": [], "rater_a": [], "rater_b": [], "n": [], "agree": []})
    pairs = pd.concat(frames, ignore_index=True)
    return pairs.groupby(["pool", "rater_a", "rater_b"], as_index=False).agg(
        n=("agree", "size"), agree=("agree", "sum")
    )
