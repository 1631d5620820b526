r"""Incremental sufficient statistics: maintained block sums of the cumulative metrics and per-rater sums.

Every metric of the core is an :class:`~labelgate.metrics._engine.ItemStatistic`: per-item block rows whose
column sums go through a ``finalize``. A monitor pass touches a set of items (those that received new
judgements). For each cumulative metric ("part") it computes the block rows of those items **before** and
**after** the merge with the core's own builders (``build_alpha``, ``build_fleiss_kappa``,
``build_gwet_ac``, ``build_cross_kappa``) on a small :class:`~labelgate.Ratings` rebuilt from the items'
category counts, and updates the stored totals by ``new - old``:

.. math:: S \leftarrow S + \sum_{i \in T} (u_i^{new} - u_i^{old}), \qquad
          M \leftarrow M + \sum_{i \in T} (u_i^{new} u_i^{new\top} - u_i^{old} u_i^{old\top}).

The value is ``finalize(S)``; the interval is the delta-method interval of the item bootstrap computed from
``S``, ``M`` and the number of items on the metric's axis
(:func:`labelgate.metrics.diagnostics.delta_interval`).
The cost of a pass is proportional to the judgements on the touched items (plus the categories), not to
the judgements merged so far. Totals are kept with a compensation term (two-sum), so that millions of
``+ new - old`` updates do not drift.

Three metrics keep their own row layout here, while every formula comes from the core: SPA, whose core block has
one column per item size *present in the data* (here: one column per size ever seen, in order of appearance; the
item agreement and the value are the core's ``agreement_from_counts`` and ``spa_from_sums``); and the moment-based
blocks of interval alpha and interval/ratio kappa_x, which the core centres at the first value of the
:class:`~labelgate.Ratings` at hand (here: at a centre fixed when the stream starts; the rows are the core's
``interval_within`` and ``moment_cross_observed``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from labelgate.core.ratings import Level, Ratings
from labelgate.metrics._engine import ItemStatistic
from labelgate.metrics._items import agreement_from_counts
from labelgate.metrics.alpha import interval_within
from labelgate.metrics.cross import IRR_BUILDERS, build_cross_kappa, moment_cross_observed
from labelgate.metrics.diagnostics import Kind, delta_interval, distance_kind
from labelgate.metrics.spa import Weighting, spa_from_sums

CROWD, TRUSTED = 0, 1
PARTS: tuple[str, ...] = ("spa", "irr_crowd", "irr_trusted", "cross_kappa", "normalized_cross_kappa")
# Above this block width the sums of outer products are not kept (no cumulative interval).
MAX_SECOND_WIDTH = 400


@dataclass
class Meta:
    """What a stream's statistics depend on besides the data."""

    level: Level
    categories: list[Any]
    center: float | None
    irr: str = "krippendorff_alpha"
    weighting: Weighting = "annotations_m1"
    sizes: list[int] = field(default_factory=list)

    @property
    def q(self) -> int:
        return len(self.categories)

    @property
    def numeric(self) -> bool:
        return self.level in ("interval", "ratio")

    @property
    def kind(self) -> Kind:
        return distance_kind(self.level)


# ------------------------------------------------------------------------------------------ items
@dataclass
class Touched:
    """The judgements (old and new) on the items a pass touches, in local codes.

    ``item`` indexes ``0..m-1``; ``value`` is centred at the stream centre (numeric levels; else 0).
    """

    item: np.ndarray
    pool: np.ndarray
    rater: np.ndarray
    code: np.ndarray
    value: np.ndarray
    new: np.ndarray
    m: int


@dataclass
class States:
    """Per-item category counts and centred moments of each pool, shape (m, q) and (m, 3)."""

    counts: list[np.ndarray]
    moments: list[np.ndarray]


def item_states(t: Touched, q: int, after: bool) -> States:
    """Item states before (``after=False``: old judgements only) or after the merge."""
    keep = np.ones(t.item.size, dtype=bool) if after else ~t.new
    counts, moments = [], []
    for pool in (CROWD, TRUSTED):
        rows = keep & (t.pool == pool)
        items, codes, values = t.item[rows], t.code[rows], t.value[rows]
        counts.append(np.bincount(items * q + codes, minlength=t.m * q).reshape(t.m, q).astype(np.float64))
        mom = np.empty((t.m, 3))
        mom[:, 0] = np.bincount(items, minlength=t.m)
        mom[:, 1] = np.bincount(items, weights=values, minlength=t.m)
        mom[:, 2] = np.bincount(items, weights=values * values, minlength=t.m)
        moments.append(mom)
    return States(counts, moments)


def ratings_from_counts(counts: np.ndarray, meta: Meta) -> Ratings | None:
    """A Ratings whose item x category counts are ``counts`` (raters are placeholders); None if empty."""
    m, q = counts.shape
    per_item = counts.sum(axis=1).astype(np.int64)
    total = int(per_item.sum())
    if total == 0:
        return None
    item_codes = np.repeat(np.arange(m, dtype=np.int64), per_item)
    value_codes = np.repeat(np.tile(np.arange(q, dtype=np.int64), m), counts.ravel().astype(np.int64))
    rater_codes = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(per_item) - per_item, per_item)
    return Ratings(
        item_codes,
        rater_codes,
        value_codes,
        item_labels=np.arange(m).astype(object),
        rater_labels=np.arange(int(per_item.max())).astype(object),
        categories=meta.categories,
        level=meta.level,
    )


def _template(meta: Meta) -> Ratings:
    q = max(meta.q, 1)
    return Ratings(
        np.zeros(q, dtype=np.int64),
        np.arange(q, dtype=np.int64),
        np.arange(q, dtype=np.int64),
        item_labels=np.asarray([0], dtype=object),
        rater_labels=np.arange(q).astype(object),
        categories=meta.categories,
        level=meta.level,
    )


def _dense_rows(stat: ItemStatistic, m: int, codes: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros((m, width))
    if codes.size == 0:
        return out
    blocks = [
        np.asarray(cast(Any, b).toarray() if sp.issparse(b) else b, dtype=np.float64)
        for b in stat.get_blocks()
    ]
    out[codes] = np.hstack([b.reshape(b.shape[0], -1) for b in blocks])
    return out


def _widths(stat: ItemStatistic) -> list[int]:
    return [int(b.shape[1]) for b in stat.get_blocks()]


def _split(flat: np.ndarray, widths: Sequence[int]) -> list[np.ndarray]:
    flat = np.atleast_2d(flat)
    edges = np.cumsum([0, *widths])
    return [flat[:, edges[j] : edges[j + 1]] for j in range(len(widths))]


class Parts:
    """Rows, axis and finalize of every cumulative metric for one stream's :class:`Meta`."""

    def __init__(self, meta: Meta) -> None:
        self.meta = meta
        tpl = _template(meta)
        self.irr_builder: Callable[..., ItemStatistic] = IRR_BUILDERS[meta.irr]
        self.moment_alpha = meta.level == "interval" and meta.irr == "krippendorff_alpha"
        self.moment_kappa = meta.numeric
        irr_tpl = self.irr_builder(tpl, np.asarray([0]))
        kx_tpl = build_cross_kappa(tpl, tpl, np.asarray([0]), np.asarray([0]))
        self.irr_widths = _widths(irr_tpl)
        self.kx_widths = _widths(kx_tpl)
        self._irr_final = irr_tpl.finalize
        self._kx_final = kx_tpl.finalize
        n_sizes = len(meta.sizes)
        self.widths: dict[str, list[int]] = {
            "spa": [n_sizes, n_sizes, meta.q],
            "irr_crowd": self.irr_widths,
            "irr_trusted": self.irr_widths,
            "cross_kappa": self.kx_widths,
            "normalized_cross_kappa": [*self.kx_widths, *self.irr_widths, *self.irr_widths],
        }

    # -- finalize ---------------------------------------------------------------------------------------
    def finalize(self, part: str) -> Callable[[np.ndarray], np.ndarray]:
        """``flat sums (B, k) -> value (B,)`` of a part."""
        if part == "spa":
            return self._spa_value
        if part in ("irr_crowd", "irr_trusted"):
            return lambda flat: self._irr_final(_split(flat, self.irr_widths))["value"]
        if part == "cross_kappa":
            return lambda flat: self._kx_final(_split(flat, self.kx_widths))["value"]
        return self._normalized_value

    def _spa_value(self, flat: np.ndarray) -> np.ndarray:
        agree, count, counts = _split(flat, self.widths["spa"])
        return spa_from_sums(agree, count, counts, np.asarray(self.meta.sizes, dtype=np.float64),
                             self.meta.weighting, self.meta.q)

    def _normalized_value(self, flat: np.ndarray) -> np.ndarray:
        wk, wi = sum(self.kx_widths), sum(self.irr_widths)
        flat = np.atleast_2d(flat)
        kx = self._kx_final(_split(flat[:, :wk], self.kx_widths))["value"]
        ix = self._irr_final(_split(flat[:, wk : wk + wi], self.irr_widths))["value"]
        iy = self._irr_final(_split(flat[:, wk + wi :], self.irr_widths))["value"]
        product = ix * iy
        root = np.sqrt(np.where(product > 0, product, np.nan))
        return kx / root

    # -- rows -------------------------------------------------------------------------------------------
    def rows(self, part: str, s: States) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(block rows (m, k), on-axis mask (m,), ratings on the axis (m,)) of the touched items."""
        n0, n1 = s.counts[CROWD].sum(axis=1), s.counts[TRUSTED].sum(axis=1)
        if part == "spa":
            return self._spa_rows(s.counts[CROWD]), n0 >= 2, n0 * (n0 >= 2)
        if part == "irr_crowd":
            return self._irr_rows(s, CROWD, None), n0 >= 2, n0 * (n0 >= 2)
        if part == "irr_trusted":
            return self._irr_rows(s, TRUSTED, None), n1 >= 2, n1 * (n1 >= 2)
        common = (n0 > 0) & (n1 > 0)
        codes = np.flatnonzero(common)
        kx = self._kx_rows(s, codes)
        if part == "cross_kappa":
            return kx, common, (n0 + n1) * common
        rows = np.hstack([kx, self._irr_rows(s, CROWD, codes), self._irr_rows(s, TRUSTED, codes)])
        return rows, common, (n0 + n1) * common

    def _spa_rows(self, counts: np.ndarray) -> np.ndarray:
        n = counts.sum(axis=1)
        pairable = n >= 2
        agree = agreement_from_counts(counts, n, np.eye(counts.shape[1]))
        slot = {size: j for j, size in enumerate(self.meta.sizes)}
        n_sizes = len(self.meta.sizes)
        onehot = np.zeros((n.size, n_sizes))
        rows = np.flatnonzero(pairable)
        onehot[rows, [slot[int(v)] for v in n[rows]]] = 1.0
        return np.hstack([onehot * agree[:, None], onehot, counts * pairable[:, None]])

    def _irr_rows(self, s: States, pool: int, subset: np.ndarray | None) -> np.ndarray:
        m = s.counts[pool].shape[0]
        width = sum(self.irr_widths)
        codes = np.arange(m) if subset is None else subset
        if self.moment_alpha:
            mom = s.moments[pool]
            on = np.zeros(m, dtype=bool)
            on[codes] = mom[codes, 0] >= 2
            mom = mom * on[:, None]
            return np.column_stack([interval_within(mom, on), mom])
        r = ratings_from_counts(s.counts[pool], self.meta)
        if r is None or codes.size == 0:
            return np.zeros((m, width))
        return _dense_rows(self.irr_builder(r, codes), m, codes, width)

    def _kx_rows(self, s: States, codes: np.ndarray) -> np.ndarray:
        m = s.counts[CROWD].shape[0]
        width = sum(self.kx_widths)
        if codes.size == 0:
            return np.zeros((m, width))
        if self.moment_kappa:
            mx, my = s.moments[CROWD][codes], s.moments[TRUSTED][codes]
            out = np.zeros((m, width))
            out[codes] = np.column_stack([moment_cross_observed(mx, my), mx, my])
            return out
        rx, ry = (
            ratings_from_counts(s.counts[CROWD], self.meta),
            ratings_from_counts(s.counts[TRUSTED], self.meta),
        )
        assert rx is not None and ry is not None  # common items exist
        return _dense_rows(build_cross_kappa(rx, ry, codes, codes), m, codes, width)


# ------------------------------------------------------------------------------------------ part sums
@dataclass
class PartState:
    """Maintained sums of one cumulative metric.

    ``hi + lo`` is the compensated total of the block rows, ``second`` the total of their outer products
    (None above :data:`MAX_SECOND_WIDTH` columns), ``n`` the items on the axis, ``ratings`` their ratings.
    """

    name: str
    widths: list[int]
    hi: np.ndarray
    lo: np.ndarray
    second: np.ndarray | None
    n: float = 0.0
    ratings: float = 0.0

    @classmethod
    def empty(cls, name: str, widths: list[int]) -> PartState:
        k = sum(widths)
        second = np.zeros((k, k)) if k <= MAX_SECOND_WIDTH else None
        return cls(name, list(widths), np.zeros(k), np.zeros(k), second)

    @property
    def total(self) -> np.ndarray:
        return self.hi + self.lo

    def expand(self, widths: list[int]) -> PartState:
        """The same sums laid out for wider blocks (categories or sizes appended at the end of a block)."""
        if list(widths) == self.widths:
            return self
        if len(widths) != len(self.widths) or any(n < o for n, o in zip(widths, self.widths, strict=True)):
            raise ValueError(f"cannot re-lay sums from {self.widths} to {widths}")
        positions = block_positions(self.widths, widths)
        out = PartState.empty(self.name, widths)
        out.hi[positions], out.lo[positions] = self.hi, self.lo
        if out.second is not None and self.second is not None:
            out.second[np.ix_(positions, positions)] = self.second
        elif out.second is not None:
            out.second = None  # the old layout kept no outer products: none can be rebuilt
        out.n, out.ratings = self.n, self.ratings
        return out

    def add(self, delta: np.ndarray, delta_second: np.ndarray | None, dn: float, dr: float) -> None:
        total = self.hi + delta
        back = total - self.hi
        self.lo += (self.hi - (total - back)) + (delta - back)
        self.hi = total
        if self.second is not None and delta_second is not None:
            self.second += delta_second
        self.n += dn
        self.ratings += dr

    def to_json(self) -> dict[str, Any]:
        return {
            "widths": self.widths,
            "hi": self.hi.tolist(),
            "lo": self.lo.tolist(),
            "second": None if self.second is None else self.second.ravel().tolist(),
            "n": self.n,
            "ratings": self.ratings,
        }

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> PartState:
        k = sum(data["widths"])
        second = (
            None if data["second"] is None else np.asarray(data["second"], dtype=np.float64).reshape(k, k)
        )
        return cls(
            name,
            list(data["widths"]),
            np.asarray(data["hi"], dtype=np.float64),
            np.asarray(data["lo"], dtype=np.float64),
            second,
            float(data["n"]),
            float(data["ratings"]),
        )


def block_positions(old: Sequence[int], new: Sequence[int]) -> np.ndarray:
    """Where the columns of blocks of widths ``old`` land when the blocks grow to widths ``new``."""
    starts = np.cumsum([0, *new])[:-1]
    return np.concatenate(
        [start + np.arange(width) for start, width in zip(starts, old, strict=True)]
    ).astype(np.int64)


def update_parts(parts: Parts, states: dict[str, PartState], old: States, new: States) -> None:
    """Add ``new - old`` block rows of the touched items to every part's sums (in place)."""
    for name in PARTS:
        state = states[name]
        rows_new, on_new, r_new = parts.rows(name, new)
        rows_old, on_old, r_old = parts.rows(name, old)
        second = None
        if state.second is not None:
            second = rows_new.T @ rows_new - rows_old.T @ rows_old
        state.add(
            rows_new.sum(axis=0) - rows_old.sum(axis=0),
            second,
            float(on_new.sum() - on_old.sum()),
            float(r_new.sum() - r_old.sum()),
        )


def part_estimate(parts: Parts, state: PartState, level: float | None) -> dict[str, Any]:
    """Value, delta-method interval, n_items, n_ratings of a part from its sums."""
    finalize = parts.finalize(state.name)
    total = state.total[None, :]
    value = float(finalize(total)[0]) if state.n > 0 else float("nan")
    low = high = float("nan")
    if level is not None and state.second is not None and state.n >= 2 and np.isfinite(value):
        _, lo, hi = delta_interval(finalize, total, state.second[None], np.asarray([state.n]), level)
        low, high = float(lo[0]), float(hi[0])
    return {
        "value": value,
        "ci_low": low,
        "ci_high": high,
        "n_items": round(state.n),
        "n_ratings": round(state.ratings),
    }
