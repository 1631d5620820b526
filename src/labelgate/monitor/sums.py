r"""The maintained sums of the cumulative metrics: per metric ("part") the total of the touched items' block rows
and of their outer products, updated by ``new - old``, and the value and interval computed from them.

For each part a pass computes the block rows of the touched items **before** and **after** the merge
(:class:`labelgate.monitor.state.Parts`) and updates the stored totals:

.. math:: S \leftarrow S + \sum_{i \in T} (u_i^{new} - u_i^{old}), \qquad
          M \leftarrow M + \sum_{i \in T} (u_i^{new} u_i^{new\top} - u_i^{old} u_i^{old\top}).

The value is ``finalize(S)``; the interval is the delta-method interval of the item bootstrap computed from
``S``, ``M`` and the number of items on the metric's axis
(:func:`labelgate.metrics.diagnostics.delta_interval`).
The cost of a pass is proportional to the judgements on the touched items (plus the categories), not to
the judgements merged so far. Totals are kept with a compensation term (two-sum), so that millions of
``+ new - old`` updates do not drift.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from labelgate.metrics.diagnostics import delta_interval
from labelgate.monitor.state import PARTS, Parts
from labelgate.monitor.touched import States

# Above this block width the sums of outer products are not kept (no cumulative interval).
MAX_SECOND_WIDTH = 400


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


def laid_out(parts: Parts, sums: dict[str, PartState]) -> dict[str, PartState]:
    """Every part's sums in the layout of ``parts`` (empty sums for a part not stored yet)."""
    return {
        name: sums[name].expand(parts.widths[name]) if name in sums else PartState.empty(name, parts.widths[name])
        for name in PARTS
    }


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
    """Value, delta-method interval (None where not finite), n_items, n_ratings of a part from its sums."""
    finalize = parts.finalize(state.name)
    total = state.total[None, :]
    value = float(finalize(total)[0]) if state.n > 0 else float("nan")
    low = high = float("nan")
    if level is not None and state.second is not None and state.n >= 2 and math.isfinite(value):
        _, lo, hi = delta_interval(finalize, total, state.second[None], np.asarray([state.n]), level)
        low, high = float(lo[0]), float(hi[0])
    return {
        "value": _finite(value),
        "ci_low": _finite(low),
        "ci_high": _finite(high),
        "n_items": round(state.n),
        "n_ratings": round(state.ratings),
    }


def _finite(value: float) -> float | None:
    """The value, or None when it is not finite (JSON and the store have no NaN)."""
    return value if math.isfinite(value) else None


def estimates(parts: Parts, sums: dict[str, PartState], level: float | None) -> dict[str, dict[str, Any]]:
    """:func:`part_estimate` of every part; empty before the stream has any sums."""
    if not sums:
        return {}
    return {name: part_estimate(parts, state, level) for name, state in laid_out(parts, sums).items()}
