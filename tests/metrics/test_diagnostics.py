"""Per-rater diagnostics (labelgate.metrics.diagnostics): oracles against the core kappa_x, flags on planted raters."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
from labelgate.core.ratings import common_categories
from labelgate.errors import ParameterError
from labelgate.metrics.diagnostics import (
    co_rating_pairs,
    delta_interval,
    design_summary,
    evaluate_pairs,
    rater_diagnostics,
)
from labelgate.pipeline.synth import PoolSpec, Scenario, simulate


def random_pools(seed: int, level: str = "nominal", n_items: int = 60, q: int = 4) -> dict:
    rng = np.random.default_rng(seed)
    rows = []
    for pool, n_raters, share in (("crowd", 8, 1.0), ("trusted", 4, 0.6)):
        for item in range(n_items):
            if rng.random() > share:
                continue
            k = rng.integers(1, min(4, n_raters) + 1)
            truth = rng.integers(0, q)
            for rater in rng.choice(n_raters, size=k, replace=False):
                label = truth if rng.random() < 0.6 else rng.integers(0, q)
                rows.append((f"i{item}", f"{pool}{rater}", int(label) + 1, pool))
    df = pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])
    return lg.ratings_by_pool(df, level=level, categories=list(range(1, q + 1)))


def subset_raters(r: lg.Ratings, keep: np.ndarray) -> lg.Ratings:
    return lg.Ratings(r.item_codes[keep], r.rater_codes[keep], r.value_codes[keep], item_labels=r.item_labels,
                      rater_labels=r.rater_labels, categories=r.categories, level=r.level)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kappa_vs_trusted_and_loo_equal_the_core_cross_kappa(level, seed):
    pools = random_pools(seed, level)
    crowd, trusted = pools["crowd"], pools["trusted"]
    rows = rater_diagnostics(crowd, trusted, ci=None)
    assert [r["rater_id"] for r in rows] == list(crowd.rater_labels)
    for g, row in enumerate(rows):
        mine = crowd.rater_codes == g
        one = subset_raters(crowd, mine)
        others = subset_raters(crowd, ~mine)
        try:
            expected = lg.cross_kappa(one, trusted).value
        except lg.DesignError:
            expected = None
        if expected is None:
            assert row["kappa_vs_trusted"] is None and row["n_shared_items"] == 0
        elif np.isnan(expected):
            assert row["kappa_vs_trusted"] is None
        else:
            assert row["kappa_vs_trusted"] == pytest.approx(expected, abs=1e-12)
        loo = lg.cross_kappa(one, others).value
        if row["loo_agreement"] is None:
            assert np.isnan(loo)
        else:
            assert row["loo_agreement"] == pytest.approx(loo, abs=1e-12)
        assert row["n_ratings"] == int(mine.sum())


def test_bias_is_the_total_variation_against_co_raters_on_the_same_items():
    pools = random_pools(5)
    crowd = pools["crowd"]
    rows = rater_diagnostics(crowd, None, ci=None)
    q = crowd.n_categories
    for g, row in enumerate(rows):
        mine = np.flatnonzero(crowd.rater_codes == g)
        items = crowd.item_codes[mine]
        others = crowd.item_counts[items].astype(float)
        others[np.arange(items.size), crowd.value_codes[mine]] -= 1
        shared = others.sum(axis=1) > 0
        p = np.bincount(crowd.value_codes[mine][shared], minlength=q) / shared.sum()
        ref = others[shared].sum(axis=0) / others[shared].sum()
        assert row["bias"] == pytest.approx(0.5 * np.abs(p - ref).sum(), abs=1e-12)
        assert row["n_loo_items"] == int(shared.sum())


def test_co_rating_pairs_match_brute_force():
    pools = random_pools(7)
    crowd = pools["crowd"]
    table = co_rating_pairs(crowd.item_codes, crowd.rater_codes, crowd.value_codes, crowd.n_raters)
    brute: dict[tuple[int, int], list[int]] = {}
    by_item: dict[int, list[tuple[int, int]]] = {}
    for i, g, c in zip(crowd.item_codes, crowd.rater_codes, crowd.value_codes, strict=True):
        by_item.setdefault(int(i), []).append((int(g), int(c)))
    for judgements in by_item.values():
        for (g, c), (h, d) in itertools.combinations(judgements, 2):
            key = (min(g, h), max(g, h))
            n, a = brute.get(key, [0, 0])
            brute[key] = [n + 1, a + int(c == d)]
    got = {(int(a), int(b)): [int(n), int(s)] for a, b, n, s in zip(table.a, table.b, table.n, table.agree,
                                                                      strict=True)}
    assert got == brute


def test_score_interval_with_one_trusted_rating_per_item_is_the_wilson_interval_of_the_counts():
    # one trusted rating per item: each item is one 0/1 trial, so the kappa interval is the Wilson interval of the
    # disagreement count mapped by kappa = 1 - p / d_e (d_e at its estimate)
    rng = np.random.default_rng(5)
    n, q = 12, 3
    truth = rng.integers(0, q, n)
    crowd = lg.Ratings.from_long({"item_id": np.arange(n), "rater_id": ["a"] * n,
                                  "label": np.where(rng.random(n) < 0.6, truth, rng.integers(0, q, n))})
    trusted = lg.Ratings.from_long({"item_id": np.arange(n), "rater_id": ["t"] * n, "label": truth})
    crowd, trusted = common_categories(crowd, trusted)
    row = rater_diagnostics(crowd, trusted, min_shared_items=1)[0]
    x = np.bincount(crowd.value_codes, minlength=crowd.n_categories) / n
    y = np.bincount(trusted.value_codes, minlength=crowd.n_categories) / n
    d_e = 1.0 - float(x @ y)
    k = int((crowd.value_codes != trusted.value_codes).sum())
    z = 1.959963984540054
    centre, half = (k / n + z * z / (2 * n)), z * np.sqrt(k / n * (1 - k / n) / n + z * z / (4 * n * n))
    low, high = (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)
    assert row["kappa_vs_trusted"] == pytest.approx(1 - (k / n) / d_e)
    assert row["kappa_ci_low"] == pytest.approx(1 - high / d_e)
    assert row["kappa_ci_high"] == pytest.approx(1 - low / d_e)


def test_score_interval_width_is_close_to_the_core_bootstrap_of_one_rater_with_many_items():
    pools = random_pools(12, n_items=400)
    crowd, trusted = pools["crowd"], pools["trusted"]
    rows = rater_diagnostics(crowd, trusted)
    g = int(np.argmax([r["n_shared_items"] for r in rows]))
    core = lg.cross_kappa(subset_raters(crowd, crowd.rater_codes == g), trusted, ci=0.95, n_boot=3000, seed=3)
    width = rows[g]["kappa_ci_high"] - rows[g]["kappa_ci_low"]
    assert width == pytest.approx(core.ci[1] - core.ci[0], rel=0.25)
    assert rows[g]["kappa_ci_low"] == pytest.approx(core.ci[0], abs=0.06)


def test_delta_interval_of_a_mean():
    u = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0], [4.0, 1.0], [10.0, 1.0]])
    value, low, high = delta_interval(lambda s: s[:, 0] / s[:, 1], u.sum(0)[None], (u.T @ u)[None],
                                      np.array([5.0]), 0.9)
    se = u[:, 0].std() / np.sqrt(5)
    assert value[0] == pytest.approx(4.0)
    assert (high[0] - low[0]) / 2 == pytest.approx(1.6448536 * se, rel=1e-6)


def planted(seed: int, n_spammers: int = 8) -> tuple[pd.DataFrame, set[str], set[str]]:
    """Synthetic crowd with planted spammers (labels replaced by uniform draws) and a colluding group."""
    scenario = Scenario(n_items=3000, pools=(
        PoolSpec("crowd", n_raters=60, ratings_per_item=(2, 4), noise=0.2, colluders=3),
        PoolSpec("trusted", n_raters=12, ratings_per_item=(3, 3), noise=0.1, item_share=0.5)))
    df = simulate(scenario, seed=seed)
    rng = np.random.default_rng(seed)
    spammers = {f"crowd-r{k:04d}" for k in rng.choice(60, size=n_spammers, replace=False)}
    rows = df["rater_id"].isin(spammers).to_numpy()
    df.loc[rows, "label"] = rng.choice(np.asarray(scenario.categories, dtype=object), size=int(rows.sum()))
    colluders = {f"crowd-colluder{k:02d}" for k in range(3)}
    return df, spammers, colluders


def test_planted_spammers_and_colluders_are_flagged_and_honest_raters_are_not():
    detected_spam, false_low, detected_coll, false_coll, n_honest = 0, 0, 0, 0, 0
    n_spam = n_coll = 0
    for seed in (1, 2):
        df, spammers, colluders = planted(seed)
        pools = lg.ratings_by_pool(df)
        rows = rater_diagnostics(pools["crowd"], pools["trusted"], min_agreement=0.3)
        for row in rows:
            rater = row["rater_id"]
            low, coll = "low_agreement" in row["flags"], "collusion" in row["flags"]
            if rater in spammers:
                n_spam += 1
                detected_spam += low
                false_coll += coll
            elif rater in colluders:
                n_coll += 1
                detected_coll += coll
                assert set(row["partners"]) == colluders - {rater}
            else:
                n_honest += 1
                false_low += low
                false_coll += coll
    print(f"spammers flagged {detected_spam}/{n_spam}, colluders flagged {detected_coll}/{n_coll}, "
          f"honest flagged low_agreement {false_low}/{n_honest}, non-colluders flagged collusion {false_coll}")
    assert detected_spam >= 0.9 * n_spam
    assert detected_coll == n_coll
    assert false_low <= 0.05 * n_honest
    assert false_coll == 0


def test_evaluate_pairs_needs_enough_items_and_another_partner():
    out = evaluate_pairs(np.array([10.0, 50.0, 50.0]), np.array([10.0, 50.0, 50.0]),
                         np.array([30.0, 80.0, 50.0]), np.array([100.0, 150.0, 50.0]),
                         np.array([30.0, 80.0, 80.0]), np.array([100.0, 150.0, 150.0]), margin=0.3, min_items=20)
    assert out["flag"].tolist() == [False, True, False]  # too few items; flagged; rater a has no other partner
    assert np.isnan(out["rest_a"][2])


def test_raters_without_trusted_items_are_judged_on_peers():
    pools = random_pools(3, n_items=300)
    rows = rater_diagnostics(pools["crowd"], None, min_agreement=0.99, min_shared_items=5)
    assert all(r["kappa_vs_trusted"] is None and r["n_shared_items"] == 0 for r in rows)
    assert all(r["agreement_basis"] == "peers" and "low_agreement" in r["flags"] for r in rows)


def test_no_interval_means_no_low_agreement_flag_and_no_judgement():
    pools = random_pools(4, n_items=200)
    rows = rater_diagnostics(pools["crowd"], pools["trusted"], ci=None, min_agreement=0.99)
    assert all(r["kappa_ci_low"] is None and "low_agreement" not in r["flags"] for r in rows)
    assert all("judged" not in r and r["p_value"] is None and r["agreement_basis"] is None for r in rows)


def test_many_raters_each_with_few_items_stays_linear():
    # 200,000 raters: a raters x raters matrix would need 3e11 cells
    rng = np.random.default_rng(0)
    n = 400_000
    items = np.repeat(np.arange(n // 2), 2)
    raters = rng.permutation(n) % 200_000
    keep = np.ones(n, dtype=bool)
    keep[1:][(items[1:] == items[:-1]) & (raters[1:] == raters[:-1])] = False
    df = pd.DataFrame({"item_id": items[keep], "rater_id": raters[keep], "label": rng.integers(0, 3, keep.sum())})
    r = lg.Ratings.from_long(df)
    rows = rater_diagnostics(r, None)
    assert len(rows) == r.n_raters


def test_parameters_are_checked():
    pools = random_pools(0)
    for name, value in (("fdr", 1.5), ("fdr", 0), ("power", 1.0), ("effect", 0.0), ("min_agreement", 1.0)):
        with pytest.raises(ParameterError, match=name):
            rater_diagnostics(pools["crowd"], **{name: value})
    with pytest.raises(ParameterError, match="'ci'"):
        rater_diagnostics(pools["crowd"], ci=1.5)


def test_design_summary():
    pools = random_pools(0)
    out = design_summary(pools["crowd"], "crowd")["crowd"]
    assert sum(out["ratings_per_item_hist"].values()) == out["n_items"]
    assert sum(k * v for k, v in out["ratings_per_item_hist"].items()) == out["n_ratings"]


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_every_level_has_intervals_around_the_kappa_and_p_values_on_the_right_side(level):
    pools = random_pools(7, level, n_items=300)
    rows = rater_diagnostics(pools["crowd"], pools["trusted"], min_agreement=0.3, min_shared_items=5)
    tested = [r for r in rows if r["p_value"] is not None and r["agreement_basis"] == "trusted"]
    assert len(tested) >= 4
    for r in rows:
        if r["kappa_ci_low"] is not None:
            assert r["kappa_ci_low"] <= r["kappa_vs_trusted"] + 1e-12 <= r["kappa_ci_high"] + 2e-12
    for r in tested:
        # a kappa below the minimum is evidence against H0 (p < 0.5), one above it is not
        assert 0.0 <= r["p_value"] <= 1.0
        assert (r["p_value"] < 0.5) == (r["kappa_vs_trusted"] < 0.3), r
