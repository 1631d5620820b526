"""Two replications on one item axis.

Items of two separately built `Ratings` are matched by id with one vectorised factorisation of both id
lists (:func:`labelgate.core.columns.factorize_objects`: cached string hashes, an int64 sort and an exact
equality check), never a Python dict over the items, and the pair put on one item index is cached on the
first: κx, normalized κx and the IRR comparison of the same pair align once.
"""

from __future__ import annotations

from typing import TypeVar, cast

import numpy as np
import numpy.typing as npt

from labelgate.core.cached import keep_pair_entry, pair_entry
from labelgate.core.columns import factorize_objects
from labelgate.core.statistics import SufficientStatistics

IntArray = npt.NDArray[np.int64]
# A `Ratings` (this module sits below core.ratings: it sees the statistics its base class defines).
R = TypeVar("R", bound=SufficientStatistics)


def align_items(x: SufficientStatistics, y: SufficientStatistics) -> tuple[IntArray, IntArray]:
    """Codes, in ``x`` and in ``y``, of the items rated in both (in ``x``'s code order).

    Items are matched by code when the two share one item index (as produced
    by :func:`ratings_by_pool` or :func:`on_one_index`), by id otherwise.
    """
    in_x = np.flatnonzero(x.ratings_per_item > 0)
    if x.shares_items_with(y):
        common = in_x[y.ratings_per_item[in_x] > 0]
        if common.size == x.n_items:  # every item: the codes every metric recognises as the whole item axis
            return x.all_items, y.all_items
        return common, common
    return _match_ids(x, y, in_x)


def on_one_index(x: R, y: R) -> tuple[R, R]:
    """The two replications on one item index — ``x``'s items, then ``y``'s other items — cached on ``x``.

    This is what :func:`ratings_by_pool` builds: items then align by code and both replications' per-item
    statistics are read in the same order (gathering ``y``'s rows in ``x``'s order is a random access that
    cost more than the whole κx). The judgements, raters and categories are those of ``x`` and ``y``.
    """
    if x.shares_items_with(y):
        return x, y
    hit = pair_entry(x, "_one_index", y)
    if hit is not None:
        return cast(R, hit[0]), cast(R, hit[1])
    n_x = len(x.item_labels)
    joint = factorize_objects(np.concatenate([np.asarray(x.item_labels, dtype=object),
                                              np.asarray(y.item_labels, dtype=object)]))
    if (joint.codes[:n_x] != np.arange(n_x)).any() or (joint.codes < 0).any():
        return x, y  # ids that are missing or repeat within x: leave the matching to align_items
    # each replication rebuilds itself (a count table from its rows, a long table from its judgements)
    x_on = cast(R, x.on_item_index(np.arange(n_x, dtype=np.int64), joint.uniques))
    y_on = cast(R, y.on_item_index(joint.codes[n_x:], joint.uniques))
    keep_pair_entry(x, "_one_index", y, x_on, y_on)
    return x_on, y_on


def _match_ids(x: SufficientStatistics, y: SufficientStatistics, in_x: IntArray) -> tuple[IntArray, IntArray]:
    in_y = np.flatnonzero(y.ratings_per_item > 0)
    joint = factorize_objects(np.concatenate([x.item_labels[in_x], y.item_labels[in_y]]))
    code_x, code_y = joint.codes[:in_x.size], joint.codes[in_x.size:]
    # item ids are unique within a Ratings, so each joint code has at most one position in y
    position = np.full(len(joint.uniques) + 1, -1, dtype=np.int64)  # the extra entry: an id coded -1
    present = code_y >= 0
    position[code_y[present]] = in_y[present]
    y_codes = position[np.where(code_x >= 0, code_x, len(joint.uniques))]
    keep = y_codes >= 0
    return in_x[keep], y_codes[keep]
