"""Judging raters (labelgate.metrics.diagnostics.judging and judge_rows): Wilson intervals, score tests,
Benjamini-Hochberg, the workload, and a small seeded simulation that keeps coverage and FDR within target.

The monitor judging a whole pool when its stored rows are read: tests/monitor/test_raters_judged_on_read.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import labelgate as lg
from labelgate.metrics.diagnostics import (
    benjamini_hochberg,
    items_needed,
    judge_rows,
    power,
    rater_diagnostics,
    score_p_value,
    wilson_interval,
)
from labelgate.pipeline.synth import PoolSpec, Scenario, simulate


def literal_bh(p: list[float], fdr: float) -> set[int]:
    """Benjamini & Hochberg (1995) as written: the largest k with p_(k) <= k q / m; reject the k smallest."""
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    k = 0
    for rank in range(m, 0, -1):
        if p[order[rank - 1]] <= rank * fdr / m:
            k = rank
            break
    return set(order[:k])


@given(st.lists(st.floats(0, 1), min_size=1, max_size=40), st.sampled_from([0.05, 0.1, 0.2]))
def test_benjamini_hochberg_equals_the_literal_procedure(p, fdr):
    got = benjamini_hochberg(np.asarray(p), fdr)
    assert set(np.flatnonzero(got).tolist()) == literal_bh(p, fdr)


def test_benjamini_hochberg_ignores_untested_raters():
    p = np.array([0.001, np.nan, 0.02, np.nan])
    assert benjamini_hochberg(p, 0.1).tolist() == [True, False, True, False]  # m = 2, not 4
    assert not benjamini_hochberg(np.array([np.nan]), 0.1).any()


@pytest.mark.parametrize(("x", "n", "low", "high"), [
    # Wilson 95 % intervals (Brown, Cai & DasGupta 2001; Newcombe 1998, Stat. Med. 17, table I)
    (0, 10, 0.0, 0.2775),
    (2, 10, 0.0567, 0.5098),
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
])
def test_wilson_interval_known_values(x, n, low, high):
    lo, hi = wilson_interval(np.array([x / n]), np.array([float(n)]))
    assert lo[0] == pytest.approx(low, abs=5e-5) and hi[0] == pytest.approx(high, abs=5e-5)


def test_wilson_interval_is_nan_without_trials():
    lo, hi = wilson_interval(np.array([0.5, np.nan]), np.array([0.0, 5.0]))
    assert np.isnan(lo).all() and np.isnan(hi).all()


@given(st.integers(1, 200), st.floats(0.05, 0.95), st.data())
def test_score_test_rejects_exactly_when_the_one_sided_wilson_bound_excludes_the_null(n, p0, data):
    x = data.draw(st.integers(0, n))
    alpha = 0.05
    p = float(score_p_value(np.array([x / n]), np.array([float(n)]), np.array([p0]))[0])
    low = float(wilson_interval(np.array([x / n]), np.array([float(n)]), 1 - 2 * alpha)[0][0])
    if abs(p - alpha) > 1e-9:
        assert (p < alpha) == (low > p0)


def test_workload_round_trip_reaches_the_power_and_one_less_does_not():
    shift, sd0, sd1 = np.array([0.15, 0.05, 0.3]), np.array([0.49, 0.5, 0.4]), np.array([0.43, 0.5, 0.3])
    for alpha in (0.1, 0.01, 0.0005):
        n = items_needed(shift, sd0, sd1, alpha, 0.8)
        assert (power(n, shift, sd0, sd1, alpha) >= 0.8 - 1e-12).all()
        assert ((power(n - 1, shift, sd0, sd1, alpha) < 0.8) | (n == 1)).all()


def test_at_the_reported_workload_the_score_test_finds_the_effect_with_the_power():
    # a rater whose disagreement is p1 against the null p0: binomial draws at the reported workload are rejected at
    # about the target rate (normal approximation: within a few points of 0.8)
    p0, p1, alpha = 0.6, 0.75, 0.01
    shift, sd0, sd1 = np.array([p1 - p0]), np.array([math.sqrt(p0 * (1 - p0))]), np.array([math.sqrt(p1 * (1 - p1))])
    n = int(items_needed(shift, sd0, sd1, alpha, 0.8)[0])
    rng = np.random.default_rng(0)
    x = rng.binomial(n, p1, size=20_000)
    rate = float((score_p_value(x / n, np.full(x.size, float(n)), np.full(x.size, p0)) <= alpha).mean())
    assert 0.77 <= rate <= 0.86, (n, rate)


def test_judge_rows_counts_only_tested_raters_and_reports_the_workload():
    work = {"basis": "trusted", "shift": 0.15, "sd_null": 0.49, "sd_alt": 0.43, "trials_per_item": 2.0}
    rows = [{"rater_id": "spam", "flags": ["collusion"], "p_value": 1e-4, "agreement_basis": "trusted",
             "n_shared_items": 40, "workload": work},
            {"rater_id": "ok", "flags": [], "p_value": 0.7, "agreement_basis": "trusted", "n_shared_items": 500,
             "workload": work},
            {"rater_id": "new", "flags": [], "p_value": None, "agreement_basis": None, "n_shared_items": 3,
             "n_loo_items": 3, "workload": work},
            {"rater_id": "none", "flags": [], "p_value": None, "agreement_basis": None, "n_shared_items": 0,
             "n_loo_items": 0, "workload": None}]
    judge_rows(rows, fdr=0.1, min_items=10)
    spam, ok, new, none = rows
    assert spam["flags"] == ["low_agreement", "collusion"] and spam["judged"] and spam["needs_items"] is None
    assert ok["flags"] == [] and ok["judged"] and ok["flag_level"] == pytest.approx(0.1)  # k = 1, m = 2
    assert new["flag_level"] == pytest.approx(0.1 * 2 / 3)  # one more tested rater
    trials = float(items_needed(np.array([0.15]), np.array([0.49]), np.array([0.43]), 0.1 * 2 / 3)[0])
    assert not new["judged"] and new["needs_items"] == max(10, math.ceil(trials / 2.0))
    # no test of its own yet: the pool's typical (median) workload
    assert not none["judged"] and none["needs_items"] == math.ceil(np.median([ok["needs_items"], new["needs_items"]]))
    again = judge_rows([dict(r) for r in rows], fdr=0.1, min_items=10)  # judging twice changes nothing
    assert [r["flags"] for r in again] == [r["flags"] for r in rows]


def _job(n_items: int, n_raters: int, seed: int, spam_share: float = 0.05) -> tuple[list[dict], set[str]]:
    crowd = PoolSpec("crowd", n_raters=n_raters, ratings_per_item=(2, 4), noise=0.2)
    trusted = PoolSpec("trusted", n_raters=12, ratings_per_item=(3, 3), noise=0.1)
    categories = ("a", "b", "c", "d", "e")
    df = simulate(Scenario(n_items=n_items, categories=categories, pools=(crowd, trusted)), seed=seed)
    rng = np.random.default_rng([seed, 1])
    n_spam = round(spam_share * n_raters)
    spammers = {f"crowd-r{k:04d}" for k in rng.choice(n_raters, size=n_spam, replace=False)} if n_spam else set()
    rows = df["rater_id"].isin(spammers).to_numpy()
    df.loc[rows, "label"] = rng.choice(np.asarray(categories, dtype=object), size=int(rows.sum()))
    pools = lg.ratings_by_pool(df.drop(columns=["timestamp"]), categories=list(categories))
    return rater_diagnostics(pools["crowd"], pools["trusted"]), spammers


def test_small_simulation_keeps_coverage_and_fdr_within_target():
    # the study of benchmarks/bench_rater_flags.py, small: 10 items per rater on average, 5 % spammers
    honest = [r["kappa_vs_trusted"] for r in _job(30_000, 10, seed=99, spam_share=0.0)[0]]
    truth = float(np.mean(honest))
    covered = total = 0
    fdp = []
    for sim in range(12):
        rows, spammers = _job(700, 200, seed=sim)
        false = sum("low_agreement" in r["flags"] for r in rows if r["rater_id"] not in spammers)
        true = sum("low_agreement" in r["flags"] for r in rows if r["rater_id"] in spammers)
        fdp.append(false / (false + true) if false + true else 0.0)
        for r in rows:
            if r["kappa_ci_low"] is not None and r["n_shared_items"] >= 5:
                target = 0.0 if r["rater_id"] in spammers else truth
                covered += r["kappa_ci_low"] <= target <= r["kappa_ci_high"]
                total += 1
    coverage = covered / total
    print(f"truth {truth:.3f}; coverage {coverage:.3f} over {total} intervals; FDR {np.mean(fdp):.3f}")
    assert total > 1500
    assert 0.93 <= coverage <= 0.975
    assert np.mean(fdp) <= 0.10
