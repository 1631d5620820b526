"""Agreement weights: the handbook's eight weightings and custom matrices (labelgate.metrics.weights).

Peer (test-only): irrCAC 0.4.4, the implementation of Gwet's *Handbook of Inter-Rater Reliability*: its ``Weights``
class for the named weightings, and ``CAC(..., weights=matrix)`` for custom matrices on random sparse designs
(items rated once, unequal numbers of ratings, unused categories). Tolerance 1e-9 (full precision).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from irrCAC.weights import Weights as IrrcacWeights

import labelgate as lg
from labelgate.metrics.weights import WEIGHTS, named_weights
from tests import oracles
from tests.metrics.test_differential import counts, designs, enough, irrcac, rated_columns, same, sparse

WEIGHTED = {"percent_agreement": lg.percent_agreement, "bennett_s": lg.bennett_s, "cohen_kappa": lg.cohen_kappa,
            "conger_kappa": lg.conger_kappa, "gwet_ac": lg.gwet_ac, "fleiss_kappa": lg.fleiss_kappa,
            "scott_pi": lg.scott_pi, "krippendorff_alpha": lg.krippendorff_alpha}


def random_positions(rng: np.random.Generator) -> np.ndarray:
    q = int(rng.integers(2, 8))
    return np.sort(rng.choice(np.arange(1, 40) / 2, size=q, replace=False))


@pytest.mark.parametrize("name", WEIGHTS)
def test_named_weights_equal_irrcac_weights(name):
    rng = np.random.default_rng(0)
    for _ in range(200):
        x = random_positions(rng)
        want = IrrcacWeights([float(v) for v in x])[name]
        np.testing.assert_allclose(named_weights(name, x), want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", WEIGHTS)
def test_named_weights_are_credits(name):
    # Symmetric, full credit on the diagonal, credits in [0, 1]; the most distant pair gets 0 (but identity).
    rng = np.random.default_rng(1)
    for _ in range(100):
        x = np.concatenate([[0.0], random_positions(rng)])  # 0 is a valid ratio-scale value here
        w = named_weights(name, x)
        assert np.array_equal(w, w.T) and np.all(np.diag(w) == 1.0)
        assert w.min() >= -1e-15 and w.max() <= 1.0
        assert math.isclose(w.min(), 0.0, abs_tol=1e-12)


def test_bipolar_example_of_the_irrcac_documentation():
    w = named_weights("bipolar", np.arange(1.0, 6.0))
    assert np.round(w[0], 8).tolist() == [1.0, 0.85714286, 0.66666667, 0.4, 0.0]
    assert np.round(w[1], 8).tolist() == [0.85714286, 1.0, 0.93333333, 0.75, 0.4]


def test_every_weighting_is_the_identity_with_two_categories():
    for name in WEIGHTS:
        assert np.array_equal(named_weights(name, np.array([2.0, 7.5])), np.eye(2)), name


def test_positions_are_ranks_from_one_for_nominal_labels():
    # Only ratio weights see where the ranks start: 1..q as in the handbook (irrCAC's non-numeric categories).
    r = lg.Ratings.from_wide([["a", "b"], ["b", "c"], ["c", "c"]], level="ordinal")
    want = IrrcacWeights(["a", "b", "c"])["ratio"]
    a = lg.gwet_ac(r, "ratio")
    b = lg.gwet_ac(r, want)
    assert a.value == b.value


@pytest.mark.parametrize("method", ["gwet", "conger", "fleiss", "bp"])
def test_custom_matrices_vs_irrcac_on_sparse_designs(method):
    functions = {"gwet": lg.gwet_ac, "conger": lg.conger_kappa, "fleiss": lg.fleiss_kappa, "bp": lg.bennett_s}
    compared = with_singles = 0
    for seed, X, cats in designs("nominal", 13):
        w = np.random.default_rng([13, seed]).uniform(0.0, 1.0, (len(cats), len(cats)))
        w = (w + w.T) / 2.0
        np.fill_diagonal(w, 1.0)
        r = lg.Ratings.from_wide(X, categories=cats)
        est = functions[method](r, w)
        if math.isnan(est.value) or (counts(X) > 0).sum() < 2:
            continue
        peer = irrcac(rated_columns(X), cats, w, method)
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
        assert same(est.details["p_o"], peer["pa"]) and same(lg.percent_agreement(r, w).value, peer["pa"])
        compared += 1
        with_singles += sparse(X)
    enough(compared)
    assert with_singles >= 20, with_singles


@pytest.mark.parametrize("name", WEIGHTS)
def test_a_named_weighting_equals_its_matrix(name):
    rng = np.random.default_rng(2)
    X, cats = oracles.random_wide(rng, level="interval", categories=[0.5, 1.0, 2.5, 4.0, 6.0], n_items=(20, 30))
    r = lg.Ratings.from_wide(X, level="interval", categories=cats)
    matrix = named_weights(name, np.asarray(cats))
    for function in WEIGHTED.values():
        if function is lg.cohen_kappa:
            continue
        assert function(r, name).value == pytest.approx(function(r, matrix).value, abs=1e-14), function


def test_identity_matrix_is_the_unweighted_coefficient():
    r = lg.Ratings.from_wide([[1, 1, 2], [0, 1, 1], [2, 2, 2], [0, 0, 1]], categories=[0, 1, 2])
    for function in WEIGHTED.values():
        if function is lg.cohen_kappa:
            continue
        assert function(r, np.eye(3)).value == function(r).value


def test_cohen_kappa_takes_every_weighting_and_matrices():
    rng = np.random.default_rng(3)
    X, cats = oracles.random_wide(rng, level="ordinal", n_raters=(2, 2), n_items=(30, 30), complete=True)
    r = lg.Ratings.from_wide(X, level="ordinal", categories=cats)
    for name in WEIGHTS:
        w = named_weights(name, np.arange(1.0, len(cats) + 1))
        assert lg.cohen_kappa(r, name).value == pytest.approx(lg.cohen_kappa(r, w).value, abs=1e-14)
        assert lg.cohen_kappa(r, name).value == pytest.approx(lg.conger_kappa(r, name).value, abs=1e-14)


# ------------------------------------------------------------------------------------ validation
RATINGS = lg.Ratings.from_wide([["a", "b"], ["b", "c"], ["c", "c"]])


def _matrix(**cells: float) -> np.ndarray:
    w = np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.5], [0.0, 0.5, 1.0]])
    for key, value in cells.items():
        i, j = int(key[1]), int(key[2])
        w[i, j] = value
    return w


@pytest.mark.parametrize("function", sorted(WEIGHTED))
@pytest.mark.parametrize(("weights", "message"), [
    (np.eye(2), r"must be 3 x 3 \(one row and column per category, in the order \['a', 'b', 'c'\]\); "
                r"got shape \(2, 2\)"),
    (np.ones(3), r"must be 3 x 3 .* got shape \(3,\)"),
    (_matrix(w11=0.9), r"must have 1 on its diagonal .*: w\('b', 'b'\) = 0.9"),
    (_matrix(w02=-0.25, w20=-0.25), r"must have every credit in \[0, 1\]: w\('a', 'c'\) = -0.25"),
    (_matrix(w02=1.5, w20=1.5), r"must have every credit in \[0, 1\]: w\('a', 'c'\) = 1.5"),
    (_matrix(w02=np.nan, w20=np.nan), r"has the non-finite value nan at \('a', 'c'\)"),
    ([["x", "y", "z"]] * 3, r"must be numeric"),
])
def test_invalid_custom_matrices_raise_naming_the_problem(function, weights, message):
    r = RATINGS if function != "cohen_kappa" else lg.Ratings.from_wide([["a", "b"], ["b", "c"], ["c", "c"]])
    with pytest.raises(lg.ParameterError, match=f"'weights' matrix of {function} {message}") as info:
        WEIGHTED[function](r, weights)
    assert info.value.context["parameter"] == "weights"


def test_rounding_residue_in_a_custom_matrix_is_accepted():
    w = _matrix()
    w[0, 1] += 1e-15
    w[1, 1] -= 1e-15
    assert lg.gwet_ac(RATINGS, w).value == pytest.approx(lg.gwet_ac(RATINGS, _matrix()).value, abs=1e-14)


def test_a_dataframe_is_a_matrix():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(_matrix(), index=list("abc"), columns=list("abc"))
    assert lg.fleiss_kappa(RATINGS, frame).value == lg.fleiss_kappa(RATINGS, _matrix()).value


def test_ratio_weights_refuse_negative_values():
    r = lg.Ratings.from_wide([[-1.0, 1.0], [1.0, 2.0], [2.0, 2.0]], level="interval")
    with pytest.raises(lg.ParameterError, match=r"ratio weights in gwet_ac need non-negative category values.*-1.0"):
        lg.gwet_ac(r, "ratio")


def test_ratio_weights_accept_zero():
    # irrCAC refuses a category 0 (0/0 on the diagonal); a pair of equal ratings gets full credit by definition.
    r = lg.Ratings.from_wide([[0.0, 1.0], [1.0, 2.0], [2.0, 2.0], [0.0, 0.0]], level="ratio")
    w = named_weights("ratio", np.array([0.0, 1.0, 2.0]))
    assert w[0].tolist() == [1.0, 0.0, 0.0] and w[1, 2] == pytest.approx(1 - (1 / 3) ** 2)
    assert math.isfinite(lg.gwet_ac(r, "ratio").value)


def test_unknown_weighting_lists_the_options():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(lg.ParameterError, match="must be one of 'identity', 'linear', 'quadratic', 'ordinal', "
                                                    "'radical', 'ratio', 'circular', 'bipolar', 'nominal', or a q x q matrix"):
            lg.scott_pi(RATINGS, "cubic")
