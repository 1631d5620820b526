"""The metrics core equals the brute-force oracles of ``tests/oracles.py`` on many small random designs.

Designs (``oracles.random_wide``): 2-12 items, 2-6 raters, 2-5 categories, cells missing at random,
items cut down to a single rating, unused categories, skewed prevalences; every measurement level.
Tolerance 1e-9 (relative and absolute). Undefined coefficients must be NaN on both sides.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import labelgate as lg
from labelgate.metrics.spa import agreement_variance
from tests import oracles

TOL = 1e-9
SEEDS = range(40)
LEVELS = ("nominal", "ordinal", "interval", "ratio")
WEIGHTS = ("identity", "linear", "quadratic")
MARGINALS = ("all_rated_items", "pairable_items")


def same(core: float, oracle: float | Fraction) -> bool:
    """Equal within TOL, or both undefined (NaN)."""
    core, oracle = float(core), float(oracle)
    if math.isnan(oracle) or math.isnan(core):
        return math.isnan(oracle) and math.isnan(core)
    return math.isclose(core, oracle, rel_tol=TOL, abs_tol=TOL)


def check(core: float, oracle: float | Fraction, X: np.ndarray, cats: list[float], what: str) -> None:
    assert same(core, oracle), f"{what}: core {float(core)!r} != oracle {float(oracle)!r}\nX={X.tolist()}\ncats={cats}"


def design(seed: int, **kw):
    rng = np.random.default_rng(seed)
    level = kw.pop("level", None) or LEVELS[seed % 4]
    X, cats = oracles.random_wide(rng, level=level, **kw)
    return X, cats, level, lg.Ratings.from_wide(X, level=level, categories=cats)


def n_single(X: np.ndarray) -> int:
    return int(((~np.isnan(X)).sum(axis=1) == 1).sum())


def n_pairable(X: np.ndarray) -> int:
    return int(((~np.isnan(X)).sum(axis=1) >= 2).sum())


# ------------------------------------------------------------------- agreement coefficients
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("weights", WEIGHTS)
def test_percent_agreement(seed, weights):
    X, cats, level, r = design(seed)
    est = lg.percent_agreement(r, weights=weights)
    check(est.value, oracles.percent_agreement(X, cats, level, weights)["value"], X, cats, "percent_agreement")
    assert est.n_items == n_pairable(X)
    assert est.n_items_excluded == n_single(X)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("weights", WEIGHTS)
def test_bennett_s(seed, weights):
    X, cats, level, r = design(seed)
    est, want = lg.bennett_s(r, weights=weights), oracles.bennett_s(X, cats, level, weights)
    check(est.value, want["value"], X, cats, "bennett_s")
    check(est.details["p_e"], want["p_e"], X, cats, "bennett_s p_e")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("marginals", MARGINALS)
def test_conger_kappa(seed, weights, marginals):
    X, cats, level, r = design(seed)
    est = lg.conger_kappa(r, weights=weights, marginals=marginals)
    want = oracles.conger_kappa(X, cats, level, weights, marginals)
    check(est.value, want["value"], X, cats, "conger_kappa")
    assert est.n_items == n_pairable(X) and est.n_items_excluded == n_single(X)
    if not math.isnan(float(want["p_e"])):
        check(est.details["p_o"], want["p_o"], X, cats, "conger p_o")
        check(est.details["p_e"], want["p_e"], X, cats, "conger p_e")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("weights", WEIGHTS)
def test_cohen_kappa_two_raters(seed, weights):
    X, cats, level, _ = design(seed, n_raters=(2, 2))
    for col in range(2):  # both raters must exist for a two-rater Ratings
        if np.isnan(X[:, col]).all():
            X[0, col] = cats[0]
    r = lg.Ratings.from_wide(X, level=level, categories=cats)
    est = lg.cohen_kappa(r, weights=weights)
    check(est.value, oracles.cohen_kappa(X, cats, level, weights)["value"], X, cats, "cohen_kappa")
    # Conger's kappa with marginals on the pairable items (those both raters judged) is Cohen's for two raters.
    conger = lg.conger_kappa(r, weights=weights, marginals="pairable_items")
    check(conger.value, est.value, X, cats, "conger == cohen")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("marginals", MARGINALS)
def test_fleiss_kappa_and_scott_pi(seed, marginals):
    X, cats, _level, r = design(seed)
    want = oracles.fleiss_kappa(X, cats, marginals)
    est = lg.fleiss_kappa(r, marginals=marginals)
    check(est.value, want["value"], X, cats, "fleiss_kappa")
    check(lg.scott_pi(r, marginals=marginals).value, want["value"], X, cats, "scott_pi")
    if not math.isnan(float(want["p_e"])):
        check(est.details["p_e"], want["p_e"], X, cats, "fleiss p_e")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("marginals", MARGINALS)
def test_gwet_ac(seed, weights, marginals):
    X, cats, level, r = design(seed)
    est = lg.gwet_ac(r, weights=weights, marginals=marginals)
    want = oracles.gwet_ac(X, cats, level, weights, marginals)
    check(est.value, want["value"], X, cats, "gwet_ac")
    if not math.isnan(float(want["p_e"])):
        check(est.details["p_e"], want["p_e"], X, cats, "gwet p_e")


@pytest.mark.parametrize("seed", SEEDS)
def test_specific_agreement(seed):
    X, cats, _level, r = design(seed)
    got = lg.specific_agreement(r)
    want = oracles.specific_agreement(X, cats)
    assert [float(c) for c in got] == cats
    for c, w in want.items():
        check(got[c].value, w, X, cats, f"specific_agreement[{c}]")
        if math.isnan(float(w)):
            assert got[c].reason_code == lg.Reason.CATEGORY_NOT_PAIRED


# ------------------------------------------------------------------------ distance-based
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("level", LEVELS)
def test_krippendorff_alpha(seed, level):
    X, cats, level, r = design(seed, level=level)
    est, want = lg.krippendorff_alpha(r), oracles.krippendorff_alpha(X, cats, level)
    check(est.value, want["value"], X, cats, f"alpha {level}")
    if not math.isnan(float(want["d_e"])):
        check(est.details["d_o"], want["d_o"], X, cats, "alpha d_o")
        check(est.details["d_e"], want["d_e"], X, cats, "alpha d_e")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("level", "distance"), [("nominal", "nominal"), ("interval", "interval"),
                                                 ("ratio", "interval"), ("ordinal", "interval"),
                                                 ("ordinal", "nominal")])
def test_iota_complete_data_eq_1_to_5(seed, level, distance):
    X, cats, level, r = design(seed, level=level, complete=True, n_items=(2, 8))
    est = lg.janson_olsson_iota(r, distance=distance)
    check(est.value, oracles.janson_olsson_iota(X, cats, level, distance)["value"], X, cats, "iota")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("level", "distance"), [("nominal", "nominal"), ("interval", "interval"),
                                                 ("ordinal", "interval")])
def test_iota_missing_data_documented_extension(seed, level, distance):
    X, cats, level, r = design(seed, level=level)
    est = lg.janson_olsson_iota(r, distance=distance)
    check(est.value, oracles.janson_olsson_iota_missing(X, cats, level, distance)["value"], X, cats, "iota")


def test_iota_oracles_agree_on_complete_data():
    # The missing-data extension is eq. 1-5 when nothing is missing.
    for seed in range(10):
        X, cats, level, _ = design(seed, level="interval", complete=True)
        a = oracles.janson_olsson_iota(X, cats, level, "interval")["value"]
        b = oracles.janson_olsson_iota_missing(X, cats, level, "interval")["value"]
        assert same(float(a), b)


# ------------------------------------------------------------------------------- kappa_x
def replications(seed: int, level: str):
    """Two replications of the same items: the columns of one random design split in two."""
    rng = np.random.default_rng(10_000 + seed)
    X, cats = oracles.random_wide(rng, level=level, n_raters=(2, 7))
    split = int(rng.integers(1, X.shape[1]))
    A, B = X[:, :split], X[:, split:]
    common = (~np.isnan(A)).any(axis=1) & (~np.isnan(B)).any(axis=1)
    if not common.any():
        A[0, 0], B[0, 0] = cats[0], cats[-1]
    return A, B, cats


CROSS_CASES = [("nominal", "nominal"), ("ordinal", "ordinal"), ("interval", "interval"), ("ratio", "interval"),
               ("ordinal", "interval"), ("nominal", "matrix")]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("level", "distance"), CROSS_CASES)
def test_cross_kappa_eq_9_to_11(seed, level, distance):
    A, B, cats = replications(seed, level)
    if distance == "matrix":  # non-symmetric, non-zero diagonal: checks the (x, y) orientation too
        rng = np.random.default_rng(seed)
        distance = (rng.integers(0, 8, size=(len(cats), len(cats))) / 4).tolist()
    x = lg.Ratings.from_wide(A, level=level, categories=cats)
    y = lg.Ratings.from_wide(B, level=level, categories=cats)
    want = oracles.cross_kappa(A, B, cats, level, distance)
    est = lg.cross_kappa(x, y, distance=distance)
    check(est.value, want["value"], A, cats, f"cross_kappa {distance}")
    if not math.isnan(float(want["value"])):
        check(est.details["d_o"], want["d_o"], A, cats, "cross d_o")
        check(est.details["d_e"], want["d_e"], A, cats, "cross d_e")
    assert est.n_items == want["n_common"]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("level", ["nominal", "interval"])
def test_normalized_cross_kappa_eq_13(seed, level):
    A, B, cats = replications(seed, level)
    common = (~np.isnan(A)).any(axis=1) & (~np.isnan(B)).any(axis=1)
    kx = float(oracles.cross_kappa(A, B, cats, level, level)["value"])
    # Each IRR on the common items only.
    ax = float(oracles.krippendorff_alpha(np.where(common[:, None], A, np.nan), cats, level)["value"])
    ay = float(oracles.krippendorff_alpha(np.where(common[:, None], B, np.nan), cats, level)["value"])
    want = kx / math.sqrt(ax * ay) if ax * ay > 0 else math.nan
    est = lg.normalized_cross_kappa(lg.Ratings.from_wide(A, level=level, categories=cats),
                                    lg.Ratings.from_wide(B, level=level, categories=cats))
    check(est.value, want, A, cats, "normalized kappa_x")
    check(est.details["irr_x"], ax, A, cats, "irr_x")
    check(est.details["irr_y"], ay, B, cats, "irr_y")


# ----------------------------------------------------------------------------------- SPA
SPA_WEIGHTINGS = ("flat", "annotations", "annotations_m1", "edges", "inv_var", "inv_var_class")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("weighting", SPA_WEIGHTINGS)
def test_spa_eq_7(seed, weighting):
    X, cats, _level, r = design(seed, level="nominal", n_categories=(2, 4))
    est = lg.spa(r, weighting=weighting)
    check(est.value, oracles.spa(X, cats, weighting)["value"], X, cats, f"spa {weighting}")


def _random_p(rng: np.random.Generator, C: int) -> tuple[Fraction, ...]:
    raw = [int(v) for v in rng.integers(0, 10, size=C)]
    raw[int(rng.integers(C))] += 1  # not all zero
    return tuple(Fraction(v, sum(raw)) for v in raw)


@pytest.mark.parametrize("n", range(2, 7))
@pytest.mark.parametrize("C", range(2, 5))
def test_agreement_variance_equals_enumeration(n, C):
    rng = np.random.default_rng(100 * n + C)
    distributions = [tuple([Fraction(1, C)] * C)] + [_random_p(rng, C) for _ in range(4)]
    distributions.append(tuple([Fraction(1)] + [Fraction(0)] * (C - 1)))  # degenerate: variance 0
    for p in distributions:
        want = oracles.agreement_variance_enum(n, p)
        got = agreement_variance([n], np.asarray([float(v) for v in p]))[0, 0]
        assert same(got, want), (n, p, got, float(want))


def test_agreement_variance_vectorised_over_n_and_p():
    rng = np.random.default_rng(7)
    ps = [_random_p(rng, 3) for _ in range(3)]
    got = agreement_variance([1, 2, 3, 5], np.asarray([[float(v) for v in p] for p in ps]))
    assert got.shape == (3, 4)
    assert np.isinf(got[:, 0]).all()  # n = 1: infinite variance, weight 0 (§5.5)
    for b, p in enumerate(ps):
        for j, n in enumerate([2, 3, 5], start=1):
            assert same(got[b, j], oracles.agreement_variance_enum(n, p))


# -------------------------------------------------------------------------- degenerate data
DEGENERATE = {
    "one category used": (np.array([[1.0, 1.0, np.nan], [1.0, 1.0, 1.0], [np.nan, 1.0, 1.0]]), [0.0, 1.0, 2.0]),
    "no pairable item": (np.array([[1.0, np.nan], [np.nan, 2.0], [0.0, np.nan]]), [0.0, 1.0, 2.0]),
    "one pairable item": (np.array([[1.0, 2.0], [np.nan, 2.0], [0.0, np.nan]]), [0.0, 1.0, 2.0]),
    "perfect agreement": (np.array([[0.0, 0.0, 0.0], [2.0, 2.0, np.nan], [1.0, np.nan, 1.0]]), [0.0, 1.0, 2.0]),
}


@pytest.mark.parametrize("case", sorted(DEGENERATE))
@pytest.mark.parametrize("level", LEVELS)
def test_degenerate_designs(case, level):
    X, cats = DEGENERATE[case]
    r = lg.Ratings.from_wide(X, level=level, categories=cats)
    pairs = [
        (lg.percent_agreement(r), oracles.percent_agreement(X, cats, level)),
        (lg.bennett_s(r), oracles.bennett_s(X, cats, level)),
        (lg.conger_kappa(r), oracles.conger_kappa(X, cats, level)),
        (lg.fleiss_kappa(r), oracles.fleiss_kappa(X, cats)),
        (lg.gwet_ac(r, "quadratic"), oracles.gwet_ac(X, cats, level, "quadratic")),
        (lg.krippendorff_alpha(r), oracles.krippendorff_alpha(X, cats, level)),
        (lg.spa(r, "inv_var_class"), oracles.spa(X, cats, "inv_var_class")),
    ]
    for est, want in pairs:
        check(est.value, want["value"], X, cats, f"{est.metric} on {case!r}")
        if math.isnan(est.value):
            assert est.reason and est.reason_code is not None, est


@pytest.mark.parametrize("offset", [1e3, 1e6, 1e8])
def test_squared_distance_metrics_with_a_large_offset(offset):
    # Interval alpha, iota and kappa_x come from moment sums: a large common offset must not cancel
    # the small differences (the oracle is exact on the same float values).
    rng = np.random.default_rng(int(offset))
    X = rng.integers(0, 4, size=(25, 4)) * 0.1 + offset
    X[rng.random(X.shape) < 0.3] = np.nan
    cats = sorted(set(X[~np.isnan(X)].tolist()))
    r = lg.Ratings.from_wide(X, level="interval", categories=cats)
    check(lg.krippendorff_alpha(r).value, oracles.krippendorff_alpha(X, cats, "interval")["value"], X, cats,
          "alpha")
    check(lg.janson_olsson_iota(r).value,
          oracles.janson_olsson_iota_missing(X, cats, "interval", "interval")["value"], X, cats, "iota")
    A, B = X[:, :2], X[:, 2:]
    est = lg.cross_kappa(lg.Ratings.from_wide(A, level="interval", categories=cats),
                         lg.Ratings.from_wide(B, level="interval", categories=cats))
    check(est.value, oracles.cross_kappa(A, B, cats, "interval", "interval")["value"], X, cats, "kappa_x")


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_cross_kappa_merges_different_category_lists(seed, level):
    # Each replication built with its own observed categories: the core re-codes both on the union.
    A, B, _ = replications(seed, level)
    x, y = lg.Ratings.from_wide(A, level=level), lg.Ratings.from_wide(B, level=level)
    union = sorted(set(A[~np.isnan(A)].tolist()) | set(B[~np.isnan(B)].tolist()))
    want = oracles.cross_kappa(A, B, union, level, level)["value"]
    check(lg.cross_kappa(x, y).value, want, A, union, "kappa_x on merged categories")
