"""Per-rater diagnostics (labelgate.metrics.diagnostics): oracles against the core kappa_x, flags on planted raters."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
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


def test_delta_interval_is_close_to_the_bootstrap_interval():
    pools = random_pools(11, n_items=400)
    crowd, trusted = pools["crowd"], pools["trusted"]
    boot = rater_diagnostics(crowd, trusted, n_boot=2000, seed=1)
    delta = rater_diagnostics(crowd, trusted, interval="delta")
    ratios = [(d["kappa_ci_high"] - d["kappa_ci_low"]) / (b["kappa_ci_high"] - b["kappa_ci_low"])
              for b, d in zip(boot, delta, strict=True) if b["n_shared_items"] >= 50]
    assert len(ratios) >= 4
    assert 0.8 < np.median(ratios) < 1.25
    for b, d in zip(boot, delta, strict=True):
        assert b["kappa_vs_trusted"] == d["kappa_vs_trusted"]


def test_bootstrap_interval_matches_the_core_bootstrap_of_one_rater():
    pools = random_pools(12, n_items=400)
    crowd, trusted = pools["crowd"], pools["trusted"]
    rows = rater_diagnostics(crowd, trusted, n_boot=3000, seed=2)
    g = int(np.argmax([r["n_shared_items"] for r in rows]))
    core = lg.cross_kappa(subset_raters(crowd, crowd.rater_codes == g), trusted, ci=0.95, n_boot=3000, seed=3)
    width_core = core.ci[1] - core.ci[0]
    width = rows[g]["kappa_ci_high"] - rows[g]["kappa_ci_low"]
    assert width == pytest.approx(width_core, rel=0.15)
    assert rows[g]["kappa_ci_low"] == pytest.approx(core.ci[0], abs=0.05)


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


@pytest.mark.parametrize("interval", ["bootstrap", "delta"])
def test_planted_spammers_and_colluders_are_flagged_and_honest_raters_are_not(interval):
    detected_spam, false_low, detected_coll, false_coll, n_honest = 0, 0, 0, 0, 0
    n_spam = n_coll = 0
    for seed in (1, 2):
        df, spammers, colluders = planted(seed)
        pools = lg.ratings_by_pool(df)
        rows = rater_diagnostics(pools["crowd"], pools["trusted"], interval=interval, n_boot=500, seed=seed,
                                 min_agreement=0.3)
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
    print(f"[{interval}] spammers flagged {detected_spam}/{n_spam}, colluders flagged {detected_coll}/{n_coll}, "
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
    rows = rater_diagnostics(pools["crowd"], None, interval="delta", min_agreement=0.99, min_shared_items=5)
    assert all(r["kappa_vs_trusted"] is None and r["n_shared_items"] == 0 for r in rows)
    assert all(r["agreement_basis"] == "peers" and "low_agreement" in r["flags"] for r in rows)


def test_no_interval_means_no_low_agreement_flag():
    pools = random_pools(4, n_items=200)
    rows = rater_diagnostics(pools["crowd"], pools["trusted"], ci=None, min_agreement=1.0)
    assert all(r["kappa_ci_low"] is None and "low_agreement" not in r["flags"] for r in rows)


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
    rows = rater_diagnostics(r, None, interval="delta")
    assert len(rows) == r.n_raters


def test_parameters_are_checked():
    pools = random_pools(0)
    with pytest.raises(ParameterError, match="interval"):
        rater_diagnostics(pools["crowd"], interval="jackknife")
    with pytest.raises(ParameterError, match="'ci'"):
        rater_diagnostics(pools["crowd"], ci=1.5)


def test_design_summary():
    pools = random_pools(0)
    out = design_summary(pools["crowd"], "crowd")["crowd"]
    assert sum(out["ratings_per_item_hist"].values()) == out["n_items"]
    assert sum(k * v for k, v in out["ratings_per_item_hist"].items()) == out["n_ratings"]
