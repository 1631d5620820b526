"""What a stream's statistics depend on (:class:`Meta`) and the per-item block rows and finalize of each cumulative
metric (:class:`Parts`), from the core's own builders.

Every metric of the core is an :class:`~labelgate.metrics._engine.ItemStatistic`: per-item block rows whose
column sums go through a ``finalize``. :class:`Parts` computes the block rows of the touched items
(:mod:`labelgate.monitor.touched`) with the core's builders (``build_alpha``, ``build_fleiss_kappa``,
``build_gwet_ac``, ``build_cross_kappa``) on a small :class:`~labelgate.Ratings` rebuilt from the items'
category counts; :mod:`labelgate.monitor.sums` adds them up.

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
from functools import partial
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from labelgate.core.ratings import Level, Ratings
from labelgate.core.sets import SetDistance, set_distance_matrix, set_ratings_type
from labelgate.metrics._engine import ItemStatistic
from labelgate.metrics._items import agreement_from_counts
from labelgate.metrics.alpha import interval_within
from labelgate.metrics.cross import build_cross_kappa, moment_cross_observed, weighted_irr
from labelgate.metrics.diagnostics import Kind, distance_kind
from labelgate.metrics.diagnostics.blocks import MatrixKind
from labelgate.metrics.spa import Weighting, agreement_credit, spa_from_sums
from labelgate.metrics.weights import symmetric_part, weight_matrix
from labelgate.monitor.touched import CROWD, TRUSTED, States

# The cumulative metrics whose sums a stream maintains.
PARTS: tuple[str, ...] = ("spa", "irr_crowd", "irr_trusted", "cross_kappa", "normalized_cross_kappa")


@dataclass
class Meta:
    """What a stream's statistics depend on besides the data."""

    level: Level
    categories: list[Any]
    center: float | None
    irr: str = "krippendorff_alpha"
    weighting: Weighting = "annotations_m1"
    sizes: list[int] = field(default_factory=list)
    weights: str | list[list[float]] | None = None  # the IRR's weighting (monitor.weights); None: its default
    distance: SetDistance | None = None  # level "set": the distance between two sets (jaccard / masi)
    elements: list[str] | None = None  # level "set": the listed categories, which a set's elements must be among
    _distances: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def q(self) -> int:
        return len(self.categories)

    @property
    def numeric(self) -> bool:
        return self.level in ("interval", "ratio")

    @property
    def kind(self) -> Kind:
        if self.level == "set":  # the per-rater blocks compare sets through their distance matrix
            return cast(Kind, MatrixKind(self.set_distances))
        return distance_kind(self.level)

    @property
    def set_distances(self) -> np.ndarray:
        """Level ``set``: the q x q distances between the sets seen so far (the core's ``set_distance_matrix``).

        The categories only grow (appended in order of appearance), and the distance of two sets depends on those two
        sets alone, so the matrix of fewer sets is the top-left corner of a later one: the sums stored under it stay
        right as sets are added. Recomputed when the number of sets changed.
        """
        if self._distances is None or self._distances.shape[0] != self.q:
            sets = [frozenset(c) for c in self.categories]
            self._distances = set_distance_matrix(sets, self.distance or "jaccard")
        return self._distances

    def ratings(self, item_codes: np.ndarray, rater_codes: np.ndarray, value_codes: np.ndarray, *,
                item_labels: np.ndarray, rater_labels: np.ndarray) -> Ratings:
        """A :class:`~labelgate.Ratings` of the stream's categories and level (label sets: the core's
        :class:`~labelgate.core.sets.SetRatings` of the stream's distance, its categories the sets seen so far)."""
        if self.level == "set":
            kind = set_ratings_type(self.distance or "jaccard")
            return kind(item_codes, rater_codes, value_codes, item_labels=item_labels, rater_labels=rater_labels,
                        categories=[frozenset(c) for c in self.categories])
        return Ratings(item_codes, rater_codes, value_codes, item_labels=item_labels, rater_labels=rater_labels,
                       categories=self.categories, level=self.level)


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
    return meta.ratings(item_codes, rater_codes, value_codes, item_labels=np.arange(m).astype(object),
                        rater_labels=np.arange(int(per_item.max())).astype(object))


def _template(meta: Meta) -> Ratings:
    q = max(meta.q, 1)
    return meta.ratings(np.zeros(q, dtype=np.int64), np.arange(q, dtype=np.int64), np.arange(q, dtype=np.int64),
                        item_labels=np.asarray([0], dtype=object), rater_labels=np.arange(q).astype(object))


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
        # With weights, the IRRs take their matrix (resolved once on the stream's fixed categories, the gate's
        # weight_matrix) and normalized kappa_x's kappa_x the distance 1 - w of its symmetric part, as
        # lg.normalized_cross_kappa(..., weights=) does. The matrix, not the name: the core computes quadratic α from
        # moments centred per Ratings, whose per-item rows could not be added across passes; 1 - w is the same α.
        self.irr_weights: np.ndarray | None = None
        self.weighted_distance: np.ndarray | None = None
        if meta.weights is not None:
            credit = weight_matrix(tpl, meta.weights, "monitor.weights")
            self.irr_weights = credit
            self.weighted_distance = 1.0 - symmetric_part(credit, "monitor.weights")[0]
        self.irr_builder: Callable[..., ItemStatistic] = partial(
            weighted_irr, meta.irr, weights=self.irr_weights, function="monitor")
        self.moment_alpha = meta.level == "interval" and meta.irr == "krippendorff_alpha" and meta.weights is None
        self.moment_kappa = meta.numeric
        irr_tpl = self.irr_builder(tpl, np.asarray([0]))
        kx_tpl = build_cross_kappa(tpl, tpl, np.asarray([0]), np.asarray([0]))
        nkx_tpl = (kx_tpl if self.weighted_distance is None else
                   build_cross_kappa(tpl, tpl, np.asarray([0]), np.asarray([0]), self.weighted_distance))
        self.irr_widths = _widths(irr_tpl)
        self.kx_widths = _widths(kx_tpl)
        self.nkx_widths = _widths(nkx_tpl)
        self._irr_final = irr_tpl.finalize
        self._kx_final = kx_tpl.finalize
        self._nkx_final = nkx_tpl.finalize
        self.spa_credit = agreement_credit(tpl)  # 1 for equal labels; label sets: 1 - their distance
        n_sizes = len(meta.sizes)
        self.widths: dict[str, list[int]] = {
            "spa": [n_sizes, n_sizes, meta.q],
            "irr_crowd": self.irr_widths,
            "irr_trusted": self.irr_widths,
            "cross_kappa": self.kx_widths,
            "normalized_cross_kappa": [*self.nkx_widths, *self.irr_widths, *self.irr_widths],
        }

    # -- finalize ---------------------------------------------------------------------------------------
    def finalize(self, part: str) -> Callable[[np.ndarray], np.ndarray]:
        """``flat sums (B, k) -> value (B,)`` of a part."""
        if part == "spa":
            return self._spa_value
        if part == "cross_kappa":
            return self._kx_value
        if part == "normalized_cross_kappa":
            return self._normalized_value
        return self._irr_value

    def _irr_value(self, flat: np.ndarray) -> np.ndarray:
        return self._irr_final(_split(flat, self.irr_widths))["value"]

    def _kx_value(self, flat: np.ndarray) -> np.ndarray:
        return self._kx_final(_split(flat, self.kx_widths))["value"]

    def _spa_value(self, flat: np.ndarray) -> np.ndarray:
        agree, count, counts = _split(flat, self.widths["spa"])
        return spa_from_sums(agree, count, counts, np.asarray(self.meta.sizes, dtype=np.float64),
                             self.meta.weighting, self.meta.q)

    def _normalized_value(self, flat: np.ndarray) -> np.ndarray:
        wk, wi = sum(self.nkx_widths), sum(self.irr_widths)
        flat = np.atleast_2d(flat)
        product = self._irr_value(flat[:, wk : wk + wi]) * self._irr_value(flat[:, wk + wi :])
        kappa = self._nkx_final(_split(flat[:, :wk], self.nkx_widths))["value"]
        return kappa / np.sqrt(np.where(product > 0, product, np.nan))

    # -- rows -------------------------------------------------------------------------------------------
    def rows(self, part: str, s: States) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(block rows (m, k), on-axis mask (m,), ratings on the axis (m,)) of the touched items."""
        n0, n1 = s.counts[CROWD].sum(axis=1), s.counts[TRUSTED].sum(axis=1)
        if part == "spa":
            return self._spa_rows(s.counts[CROWD]), n0 >= 2, n0 * (n0 >= 2)
        # Krippendorff's α rests on pairable items only; the handbook's Fleiss and Gwet take every rated item
        # into their chance marginals, so every rated item is a sampling unit of their interval
        least = 2 if self.meta.irr == "krippendorff_alpha" else 1
        if part == "irr_crowd":
            return self._irr_rows(s, CROWD, None), n0 >= least, n0 * (n0 >= least)
        if part == "irr_trusted":
            return self._irr_rows(s, TRUSTED, None), n1 >= least, n1 * (n1 >= least)
        common = (n0 > 0) & (n1 > 0)
        codes = np.flatnonzero(common)
        if part == "cross_kappa":
            return self._kx_rows(s, codes), common, (n0 + n1) * common
        kx = self._kx_rows(s, codes, self.weighted_distance)
        rows = np.hstack([kx, self._irr_rows(s, CROWD, codes), self._irr_rows(s, TRUSTED, codes)])
        return rows, common, (n0 + n1) * common

    def _spa_rows(self, counts: np.ndarray) -> np.ndarray:
        n = counts.sum(axis=1)
        pairable = n >= 2
        agree = agreement_from_counts(counts, n, self.spa_credit)
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

    def _kx_rows(self, s: States, codes: np.ndarray, distance: np.ndarray | None = None) -> np.ndarray:
        """kappa_x's rows: the level's distance, or the fixed matrix ``distance`` (normalized kappa_x's, weighted)."""
        m = s.counts[CROWD].shape[0]
        width = sum(self.kx_widths if distance is None else self.nkx_widths)
        if codes.size == 0:
            return np.zeros((m, width))
        if self.moment_kappa and distance is None:
            mx, my = s.moments[CROWD][codes], s.moments[TRUSTED][codes]
            out = np.zeros((m, width))
            out[codes] = np.column_stack([moment_cross_observed(mx, my), mx, my])
            return out
        rx, ry = (
            ratings_from_counts(s.counts[CROWD], self.meta),
            ratings_from_counts(s.counts[TRUSTED], self.meta),
        )
        assert rx is not None and ry is not None  # common items exist
        return _dense_rows(build_cross_kappa(rx, ry, codes, codes, distance), m, codes, width)
