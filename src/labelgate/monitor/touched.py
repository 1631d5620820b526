"""The judgements a pass touches: the old and new judgements on the items that received new ones, and each item's
category counts and centred moments per pool, before and after the merge.

Both the item sums (:mod:`labelgate.monitor.sums`) and the per-rater sums (:mod:`labelgate.monitor.raters`) are
updated from these two states of the touched items.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

# Pool codes of the stored judgements.
CROWD, TRUSTED = 0, 1
# Pool code of a marker row in a question's frame: an item its delivery restates (no judgement; never stored).
RESTATED = -1


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

    @classmethod
    def from_frames(cls, existing: pd.DataFrame, new: pd.DataFrame, center: float | None) -> Touched:
        """The stored judgements of the touched items and the new ones (columns ``pool, item_id, rater_id, code,
        value``); values are centred at ``center``, or all 0 when it is None (categorical levels)."""
        both = pd.concat(
            [existing.assign(new=False), new[existing.columns].assign(new=True)], ignore_index=True
        )
        item, _ = pd.factorize(both["item_id"])
        values = (
            np.zeros(len(both)) if center is None else both["value"].to_numpy(dtype=np.float64) - center
        )
        return cls(
            item.astype(np.int64),
            both["pool"].to_numpy(np.int64),
            both["rater_id"].to_numpy(object),
            both["code"].to_numpy(np.int64),
            values,
            both["new"].to_numpy(bool),
            int(item.max()) + 1,
        )


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
