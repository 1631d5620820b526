"""The pools of a batch, whatever engine built them, and the errors of a batch that lacks what a parameter names.

Shared by the GX pandas providers (:mod:`labelgate.gx._metrics`), the aggregate plan (:mod:`labelgate.sqlagg.plan`)
and its backends, so every engine reports the same coverage and words its errors alike.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labelgate.core.ratings import Ratings
from labelgate.errors import ParameterError
from labelgate.metrics._resamples import SharedResamples


@dataclass
class Pools:
    """The crowd (and trusted) ratings of one batch, and how far they overlap.

    ``resamples``: the item bootstrap's resample matrices, drawn once for the metrics computed on these pools
    (the expectations of a suite share the pools, so their bootstraps with the same seed on the same number of
    items draw once: :mod:`labelgate.metrics._resamples`); freed with the pools.
    """

    crowd: Ratings
    trusted: Ratings | None
    coverage: dict[str, Any]
    resamples: SharedResamples = field(default_factory=SharedResamples, repr=False, compare=False)


def pool_coverage(crowd: Ratings, trusted: Ratings | None) -> dict[str, Any]:
    """Counts of rated items per pool and the share of crowd items also rated by the trusted pool."""
    in_crowd = crowd.ratings_per_item > 0
    out: dict[str, Any] = {"n_crowd_items": int(in_crowd.sum()), "n_crowd_ratings": int(crowd.n_ratings)}
    if trusted is None:
        return out
    in_trusted = trusted.ratings_per_item > 0
    common = int((in_crowd & in_trusted).sum())
    out.update({"n_trusted_items": int(in_trusted.sum()), "n_trusted_ratings": int(trusted.n_ratings),
                "n_common_items": common, "coverage": common / max(int(in_crowd.sum()), 1)})
    return out


def missing_question_column(question: Any, column: Any, columns: Any) -> ParameterError:
    """The batch has no ``question_column``."""
    return ParameterError(f"The 'question' parameter is {question!r} but the batch has no question column "
                          f"{column!r} (set 'question_column'); columns: {sorted(map(str, columns))}.",
                          parameter="question_column", value=column)


def missing_question(question: Any, column: str, values: Any) -> ParameterError:
    """No row holds ``question``; ``values`` are the column's non-missing values."""
    present = sorted(map(str, values))[:20]
    return ParameterError(f"The 'question' parameter is {question!r}, which no row of column {column!r} "
                          f"holds; values: {present}.", parameter="question", value=question)


def missing_pool_column(pool_col: Any, columns: Any) -> ParameterError:
    """``pool_column`` is None although two pools are compared, or not a column of the batch."""
    if pool_col is None:
        return ParameterError("The 'pool_column' parameter is None, but this expectation compares two pools "
                              "and needs a pool column.", parameter="pool_column")
    return ParameterError(f"The 'pool_column' parameter is {pool_col!r}, which is not a column of the batch; "
                          f"columns: {sorted(map(str, columns))}.", parameter="pool_column", value=pool_col)


def missing_pool(column: str, name: str, value: Any, values: Any) -> ParameterError:
    """No row of the pool column holds the pool parameter ``name``; ``values`` are the pools present."""
    present = sorted(map(str, values))[:20]
    return ParameterError(f"The {name!r} parameter is {value!r}, but no row of the pool column {column!r} "
                          f"holds that value; pools in the batch: {present}.", parameter=name, value=value)


def counts_digest(ratings: Ratings | None) -> str | None:
    """SHA-256 of a pool's item ids and item x category counts (None for no pool): two reads of a table that agree
    on it gave every statistic the same input, so a reader can tell that the table did not change between them.

    >>> def pool(labels):
    ...     return Ratings.from_long({"item_id": ["i", "i", "j"], "rater_id": ["r", "s", "r"], "label": labels},
    ...                              categories=["x", "y"])
    >>> counts_digest(pool(["x", "y", "x"])) == counts_digest(pool(["x", "y", "x"])), counts_digest(None)
    (True, None)
    >>> counts_digest(pool(["x", "y", "x"])) == counts_digest(pool(["x", "y", "y"]))
    False
    """
    if ratings is None:
        return None
    counts = np.ascontiguousarray(ratings.item_counts, dtype=np.int64)
    digest = hashlib.sha256(json.dumps([repr(i) for i in ratings.item_labels]).encode())
    digest.update(np.asarray(counts.shape, dtype=np.int64).tobytes() + counts.tobytes())
    return digest.hexdigest()
