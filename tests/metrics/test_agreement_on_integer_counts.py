"""The agreement family's point path on integer counts (issue 17): the same numbers, no float copy of the table."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import labelgate as lg
from labelgate.metrics._chance import _integer_marginal_totals, _marginal_totals
from labelgate.metrics._items import agreement_from_counts, item_agreement, square_sums, view


def _ragged(seed: int, n_items: int = 60, q: int = 4, most: int = 7) -> lg.Ratings:
    """Items with 0..most ratings (some single, some unrated columns) and an unused category."""
    rng = np.random.default_rng(seed)
    wide = np.where(rng.random((n_items, most)) < rng.random((n_items, 1)), rng.integers(0, q, (n_items, most)),
                    np.nan)
    return lg.Ratings.from_wide(wide, categories=list(range(q + 1)))


def _exact_shares(r: lg.Ratings, least: int, pooled: bool) -> list[Fraction]:
    """Sum over items with >= least ratings of n_ic / n_i (or n_ic), in rationals."""
    counts, n = r.item_counts, r.ratings_per_item
    return [sum((Fraction(int(counts[i, c]), 1 if pooled else int(n[i])) for i in range(n.size) if n[i] >= least),
                Fraction(0)) for c in range(r.n_categories)]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(("marginals", "pooled"), [("all_rated_items", False), ("pairable_items", False),
                                                   ("pairable_items", True)])
def test_integer_marginal_totals_are_the_exact_sums_rounded_once(seed, marginals, pooled):
    r = _ragged(seed)
    v = view(r, min_ratings=1)
    mask = v.marginal_items(marginals)
    got = _integer_marginal_totals(v, mask, pooled)
    assert got is not None
    expected = _exact_shares(r, 1 if marginals == "all_rated_items" else 2, pooled)
    assert got.tolist() == [float(x) for x in expected]  # correctly rounded, not merely close
    # the float route it replaces agrees to rounding
    weight = mask.astype(float) if pooled else np.divide(1.0, v.n, out=np.zeros(v.n.size), where=mask)
    np.testing.assert_allclose(got, weight @ v.counts, rtol=1e-13, atol=0)


def test_integer_marginal_totals_fall_back_on_other_masks_and_huge_multiples():
    r = _ragged(1)
    v = view(r, min_ratings=1)
    other = v.pairable.copy()  # equal values, but not the view's own mask: no known size threshold
    assert _integer_marginal_totals(v, other, False) is None
    np.testing.assert_allclose(_marginal_totals(v, other), _marginal_totals(v, v.pairable), rtol=1e-13)
    # 1..40 ratings per item: the least common multiple of the sizes (~5e15) leaves the exact float range
    sizes = np.arange(1, 41)
    big = lg.Ratings.from_long({"item": np.repeat(np.arange(40), sizes), "rater": np.concatenate(
        [np.arange(k) for k in sizes]), "label": np.arange(sizes.sum()) % 3}, item="item", rater="rater",
        value="label")
    vb = view(big, min_ratings=1)
    assert _integer_marginal_totals(vb, vb.marginal_items("all_rated_items"), False) is None
    exact = [float(x) for x in _exact_shares(big, 1, False)]
    np.testing.assert_allclose(_marginal_totals(vb, vb.marginal_items("all_rated_items")), exact, rtol=1e-13)


def test_no_marginal_item_gives_zero_totals():
    r = lg.Ratings.from_wide([[0, None], [1, None], [None, 2]], categories=[0, 1, 2])
    v = view(r, min_ratings=1)
    assert _integer_marginal_totals(v, v.pairable, False).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("seed", range(6))
def test_exact_agreement_from_integer_square_sums_is_bitwise_the_float_route(seed):
    r = _ragged(seed)
    for v in (view(r, min_ratings=1), view(r), view(r, np.asarray([0, 3, 5, 7]))):
        float_counts = r.item_counts[v.codes].astype(float)
        old = np.zeros(v.n.size)  # the former route: float einsum, zero-filled masked quotient
        np.divide(np.einsum("ic,ic->i", float_counts, float_counts) - v.n, v.n * (v.n - 1.0), out=old,
                  where=v.n >= 2)
        assert square_sums(v).tolist() == np.einsum("ic,ic->i", float_counts, float_counts).tolist()
        assert item_agreement(v, np.eye(r.n_categories)).tobytes() == old.tobytes()
        assert agreement_from_counts(float_counts, v.n, np.eye(r.n_categories)).tobytes() == old.tobytes()


def test_single_coefficient_keeps_no_float_table_and_other_metrics_still_get_one():
    r = _ragged(3, n_items=200)
    fleiss = float(lg.fleiss_kappa(r))
    gwet = float(lg.gwet_ac(r))
    v = view(r, min_ratings=1)
    assert "counts" not in v.shared and "_float_item_counts" not in r.__dict__
    alpha = float(lg.krippendorff_alpha(r))  # needs the float table: converted once, shared, read-only
    assert v.counts is v.counts and not v.counts.flags.writeable
    assert v.counts.tolist() == r.item_counts.astype(float).tolist()
    fresh = _ragged(3, n_items=200)
    assert float(lg.krippendorff_alpha(fresh)) == alpha
    assert float(lg.fleiss_kappa(fresh)) == fleiss and float(lg.gwet_ac(fresh)) == gwet  # order does not matter


def test_fleiss_matches_rationals_on_ragged_items():
    """Fleiss/Scott with Gwet's marginals against exact rational arithmetic (items of 0..7 ratings)."""
    r = _ragged(11, n_items=80)
    counts, n = r.item_counts, r.ratings_per_item
    pair = [i for i in range(n.size) if n[i] >= 2]
    p_a = sum((Fraction(int((counts[i] ** 2).sum() - n[i]), int(n[i] * (n[i] - 1))) for i in pair), Fraction(0))
    p_a /= len(pair)
    rated = [i for i in range(n.size) if n[i] >= 1]
    pi = [sum((Fraction(int(counts[i, c]), int(n[i])) for i in rated), Fraction(0)) / len(rated)
          for c in range(r.n_categories)]
    p_e = sum((p * p for p in pi), Fraction(0))
    expected = float((p_a - p_e) / (1 - p_e))
    assert float(lg.fleiss_kappa(r)) == pytest.approx(expected, rel=1e-14)
    assert float(lg.scott_pi(r)) == float(lg.fleiss_kappa(r))
