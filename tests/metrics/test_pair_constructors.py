"""Every two-replication function on every pair of constructors, in both argument orders.

The same judgements built by each constructor (long, wide, count table, aggregated rows, contingency table, a pool
of one table) must give every pair function the value the two long tables give. Functions that need rater identity
refuse a count table (placeholder raters) with ``DesignError``, never a ``TypeError`` from re-indexing the items.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
from labelgate.errors import DesignError
from labelgate.metrics.cross import cross_pair, irr_comparison
from labelgate.metrics.xcc import cross_correlation, disattenuated_correlation


def _pairs(seed: int, n: int = 24, q: int = 3) -> np.ndarray:
    """Two raters' labels of n items, sorted lexicographically: the item order of a contingency table."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, q, size=n)
    second = np.where(rng.random(n) < 0.6, truth, rng.integers(0, q, size=n))
    pairs = np.column_stack([truth, second])
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def _long(pairs: np.ndarray, pool: str) -> pd.DataFrame:
    n = len(pairs)
    frame = pd.DataFrame({"item_id": np.tile(np.arange(n), 2), "rater_id": np.repeat([f"{pool}a", f"{pool}b"], n),
                          "label": pairs.T.ravel(), "pool": pool})
    return frame.sample(frac=1.0, random_state=0)  # row order must not matter


def _build(how: str, pairs: np.ndarray, pool: str, level: str, q: int = 3) -> lg.Ratings:
    n = len(pairs)
    counts = np.zeros((n, q), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(n), 2), pairs.ravel()), 1)
    if how == "long":
        return lg.Ratings.from_long(_long(pairs, pool), level=level)
    if how == "wide":
        return lg.Ratings.from_wide(pairs, level=level)
    if how == "counts":
        return lg.Ratings.from_counts(counts, level=level)
    if how == "aggregates":
        item, cat = np.nonzero(counts)
        return lg.Ratings.from_aggregates(item, cat, counts[item, cat], item_labels=list(range(n)),
                                          categories=list(range(q)), level=level)
    if how == "contingency":
        table = np.zeros((q, q), dtype=np.int64)
        np.add.at(table, (pairs[:, 0], pairs[:, 1]), 1)
        return lg.Ratings.from_contingency(table, level=level)
    raise AssertionError(how)


CONSTRUCTORS = ["long", "wide", "counts", "aggregates", "contingency", "pool"]
# name -> (function, whether it needs rater identity, levels it applies to)
FUNCTIONS = {
    "cross_kappa": (lambda x, y: lg.cross_kappa(x, y), False),
    "normalized_cross_kappa": (lambda x, y: lg.normalized_cross_kappa(x, y), False),
    "cross_pair": (lambda x, y: cross_pair(x, y)["normalized_cross_kappa"], False),
    "irr_comparison": (lambda x, y: irr_comparison(x, y), False),
    "irr_comparison_conger": (lambda x, y: irr_comparison(x, y, irr="conger_kappa"), True),
    "cross_correlation": (lambda x, y: cross_correlation(x, y), True),
    "disattenuated_correlation": (lambda x, y: disattenuated_correlation(x, y, seed=3), False),
}
PLACEHOLDER_RATERS = {"counts", "aggregates"}


def _replications(first: str, second: str, level: str) -> tuple[lg.Ratings, lg.Ratings]:
    px, py = _pairs(1), _pairs(2)
    if first == "pool" or second == "pool":
        pools = lg.ratings_by_pool(pd.concat([_long(px, "x"), _long(py, "y")]), level=level)
    x = pools["x"] if first == "pool" else _build(first, px, "x", level)
    y = pools["y"] if second == "pool" else _build(second, py, "y", level)
    return x, y


@pytest.mark.parametrize("level", ["nominal", "interval"])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_every_pair_function_on_every_constructor_pair_in_both_orders(name, level):
    function, needs_raters = FUNCTIONS[name]
    if level == "nominal" and name in ("cross_correlation", "disattenuated_correlation"):
        pytest.skip("the correlations need numeric labels")
    reference = {order: function(*(_replications("long", "long", level)[::order])) for order in (1, -1)}
    assert all(math.isfinite(float(value)) for value in reference.values())
    for first, second in itertools.product(CONSTRUCTORS, repeat=2):
        x, y = _replications(first, second, level)
        for order, args in ((1, (x, y)), (-1, (y, x))):
            if needs_raters and {first, second} & PLACEHOLDER_RATERS:
                with pytest.raises(DesignError):
                    function(*args)
                continue
            got = function(*args)
            if name == "disattenuated_correlation":
                # the random split halves shuffle each item's judgements from their stored order, which differs
                # between constructors; the correlation of the item means does not depend on it
                assert got.details["r_xy"] == pytest.approx(reference[order].details["r_xy"], rel=1e-12)
                assert math.isfinite(float(got)), (first, second, order)
                continue
            assert float(got) == pytest.approx(float(reference[order]), rel=1e-12, abs=1e-12), (first, second, order)


@pytest.mark.parametrize("order", [1, -1])
def test_the_count_table_reproduction_gives_kappa_x_one_half_in_both_orders(order):
    x = lg.Ratings.from_counts([[0, 2], [2, 0]])
    y = lg.Ratings.from_counts([[1, 1], [2, 0]])
    assert float(lg.cross_kappa(*(x, y)[::order])) == pytest.approx(0.5, abs=1e-12)


def test_a_count_table_stays_aggregated_when_put_on_a_pair_index():
    x = lg.Ratings.from_counts([[0, 2], [2, 0], [1, 1]])
    y = lg.Ratings.from_long({"item_id": [2, 2, 5], "rater_id": ["a", "b", "a"], "label": [0, 1, 1]})
    from labelgate.core.align import on_one_index
    from labelgate.core.ratings import AggregatedRatings, common_categories

    x_on, y_on = on_one_index(x, y)
    assert isinstance(x_on, AggregatedRatings) and not x_on.expanded
    assert list(x_on.item_labels) == [0, 1, 2, 5] and x_on.item_counts.tolist() == [[0, 2], [2, 0], [1, 1], [0, 0]]
    assert y_on.item_counts.tolist() == [[0, 0], [0, 0], [1, 1], [0, 1]]
    wider = common_categories(x_on, lg.Ratings.from_long({"item_id": [0], "rater_id": ["a"], "label": [2]}))[0]
    assert isinstance(wider, AggregatedRatings) and wider.categories == (0, 1, 2)
    assert wider.item_counts.tolist() == [[0, 2, 0], [2, 0, 0], [1, 1, 0], [0, 0, 0]]
