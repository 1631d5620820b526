"""Property tests (hypothesis) for the reductions and invariances the seed papers state."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import labelgate as lg

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def wide_ratings(draw, min_items=3, max_items=14, min_raters=2, max_raters=5, max_q=4, missing=True):
    n_items = draw(st.integers(min_items, max_items))
    n_raters = draw(st.integers(min_raters, max_raters))
    q = draw(st.integers(2, max_q))
    data = draw(arrays(np.float64, (n_items, n_raters), elements=st.integers(0, q - 1).map(float)))
    if missing:
        mask = draw(arrays(np.bool_, (n_items, n_raters)))
        mask[:, 0] = False
        data[mask] = np.nan
    return data, q


def _finite_equal(a: float, b: float) -> None:
    if np.isnan(a) or np.isnan(b):
        assert np.isnan(a) and np.isnan(b)
    else:
        assert a == pytest.approx(b, abs=1e-9)


@SETTINGS
@given(st.data())
def test_cross_kappa_with_one_rating_each_is_cohen(data):
    # xRR paper §3.2
    n = data.draw(st.integers(3, 30))
    q = data.draw(st.integers(2, 4))
    a = np.asarray(data.draw(st.lists(st.integers(0, q - 1), min_size=n, max_size=n)))
    b = np.asarray(data.draw(st.lists(st.integers(0, q - 1), min_size=n, max_size=n)))
    cats = list(range(q))
    x = lg.Ratings.from_wide(a[:, None], categories=cats)
    y = lg.Ratings.from_wide(b[:, None], categories=cats)
    both = lg.Ratings.from_wide(np.column_stack([a, b]), categories=cats)
    _finite_equal(float(lg.cross_kappa(x, y)), float(lg.cohen_kappa(both)))


@SETTINGS
@given(wide_ratings(), wide_ratings())
def test_cross_kappa_is_symmetric(first, second):
    (a, _), (b, _) = first, second
    n = min(a.shape[0], b.shape[0])
    x, y = lg.Ratings.from_wide(a[:n]), lg.Ratings.from_wide(b[:n])
    _finite_equal(float(lg.cross_kappa(x, y)), float(lg.cross_kappa(y, x)))
    _finite_equal(float(lg.normalized_cross_kappa(x, y)), float(lg.normalized_cross_kappa(y, x)))


@SETTINGS
@given(wide_ratings(min_raters=2, max_raters=2, missing=False))
def test_conger_with_two_raters_is_cohen(wide):
    data, q = wide
    r = lg.Ratings.from_wide(data, categories=list(range(q)), level="ordinal")
    for weights in ("identity", "linear", "quadratic"):
        _finite_equal(float(lg.conger_kappa(r, weights)), float(lg.cohen_kappa(r, weights)))


@SETTINGS
@given(wide_ratings())
def test_iota_reduces_to_conger(wide):
    # Berry & Mielke / xRR §3.1: nominal iota is Conger's kappa; interval iota (squared distance) is Conger's
    # kappa with quadratic weights, since 1 - w is proportional to the squared distance. Iota's rater marginals
    # are over the pairable items (its missing-data extension), i.e. Conger's marginals="pairable_items".
    data, q = wide
    nominal = lg.Ratings.from_wide(data, categories=list(range(q)))
    conger = lg.conger_kappa(nominal, marginals="pairable_items")
    _finite_equal(float(lg.janson_olsson_iota(nominal)), float(conger))
    interval = lg.Ratings.from_wide(data, categories=list(range(q)), level="interval")
    conger = lg.conger_kappa(interval, "quadratic", marginals="pairable_items")
    _finite_equal(float(lg.janson_olsson_iota(interval)), float(conger))


@SETTINGS
@given(wide_ratings())
def test_spa_reductions(wide):
    # SPA paper §3: flat weights give the mean item agreement (P-bar on complete data); k = n gives
    # 1 - D_o of Krippendorff's alpha with the identity "distance" (eq. 6).
    data, _ = wide
    r = lg.Ratings.from_wide(data)
    flat = float(lg.spa(r, "flat"))
    _finite_equal(flat, float(lg.percent_agreement(r)))
    alpha = lg.krippendorff_alpha(r)
    if "d_o" in alpha.details:
        _finite_equal(float(lg.spa(r, "annotations")), 1.0 - alpha.details["d_o"])


@SETTINGS
@given(wide_ratings(missing=False))
def test_spa_flat_on_complete_data_is_joint_probability_of_agreement(wide):
    data, _ = wide
    r = lg.Ratings.from_wide(data)
    n = data.shape[1]
    p_bar = np.mean([sum(np.sum(row == c) * (np.sum(row == c) - 1) for c in np.unique(row)) / (n * (n - 1))
                     for row in data])  # SPA paper eq. 1-2
    assert float(lg.spa(r, "flat")) == pytest.approx(p_bar, abs=1e-12)
    for weighting in ("annotations", "annotations_m1", "edges", "inv_var", "inv_var_class"):
        # with equal numbers of annotations every weighting is flat
        assert float(lg.spa(r, weighting)) == pytest.approx(p_bar, abs=1e-12)


@SETTINGS
@given(wide_ratings(), st.integers(0, 2**32 - 1))
def test_rater_relabelling_and_order_do_not_matter(wide, seed):
    data, q = wide
    rng = np.random.default_rng(seed)
    shuffled = data[rng.permutation(data.shape[0])][:, rng.permutation(data.shape[1])]
    a = lg.Ratings.from_wide(data, categories=list(range(q)))
    b = lg.Ratings.from_wide(shuffled, categories=list(range(q)))
    for metric in (lg.conger_kappa, lg.fleiss_kappa, lg.gwet_ac, lg.krippendorff_alpha, lg.bennett_s):
        _finite_equal(float(metric(a)), float(metric(b)))


# Found by hypothesis (issue 16): the only pairable values are all 1 and the moments are centred at the single
# rating 0, so after rescaling the expected disagreement was a rounding residue (~1e-15) and alpha came out 1.0.
CONSTANT_PAIRABLE = np.array([[0.0, np.nan], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])


@SETTINGS
@given(wide_ratings(), st.floats(0.5, 10), st.floats(-5, 5))
@example((CONSTANT_PAIRABLE, 2), 1.7156, -5.0)
def test_interval_metrics_are_invariant_to_affine_rescaling(wide, scale, shift):
    data, _ = wide
    a = lg.Ratings.from_wide(data, level="interval")
    b = lg.Ratings.from_wide(data * scale + shift, level="interval")
    for metric in (lg.krippendorff_alpha, lg.janson_olsson_iota):
        va, vb = float(metric(a)), float(metric(b))
        if np.isnan(va):
            assert np.isnan(vb)
        else:
            assert vb == pytest.approx(va, abs=1e-7)


@pytest.mark.parametrize(("scale", "shift"), [(1.0, 0.0), (1.7156, -5.0), (1.7156, -4.75), (3.3, 0.1), (1e6, 3.0),
                                            (1e-6, 0.0)])
def test_constant_pairable_values_have_no_expected_disagreement_at_any_scale(scale, shift):
    # The degeneracy is decided relative to the data's scale (docs/degenerate-input.md), not with == 0.
    r = lg.Ratings.from_wide(CONSTANT_PAIRABLE * scale + shift, level="interval")
    for metric in (lg.krippendorff_alpha, lg.janson_olsson_iota):
        est = metric(r)
        assert est.is_nan and est.reason_code == lg.Reason.NO_EXPECTED_DISAGREEMENT, (metric, est)
        assert est.details["d_e"] == 0.0


def test_cross_kappa_constant_common_values_have_no_expected_disagreement_at_any_scale():
    x = lg.Ratings.from_wide(CONSTANT_PAIRABLE * 1.7156 - 5.0, level="interval")
    y = lg.Ratings.from_wide(CONSTANT_PAIRABLE[:, :1] * 1.7156 - 5.0, level="interval")
    y = y.subset_items([1, 2, 3])  # the items rated in both hold the constant value only
    assert lg.cross_kappa(x, y).is_nan


def test_normalized_cross_kappa_tends_to_one_for_one_process():
    # xRR paper §3.5: both replications drawn from one process -> kappa_x -> IRR and normalized kappa_x -> 1
    rng = np.random.default_rng(2024)
    n_items, q = 20_000, 4
    probs = rng.dirichlet(np.full(q, 0.6), size=n_items)
    cum = probs.cumsum(axis=1)

    def replication() -> lg.Ratings:
        draws = (rng.random((n_items, 3))[:, :, None] > cum[:, None, :]).sum(axis=2)
        return lg.Ratings.from_wide(draws, categories=list(range(q)))

    x, y = replication(), replication()
    est = lg.normalized_cross_kappa(x, y)
    assert est.details["cross_kappa"] == pytest.approx(est.details["irr_x"], abs=0.02)
    assert float(est) == pytest.approx(1.0, abs=0.03)


def test_spa_is_unbiased_under_random_removal_of_annotations():
    # SPA paper §4: removing annotations at random (independently of the labels) leaves E[SPA] unchanged.
    rng = np.random.default_rng(99)
    n_items, n_ann, q = 150, 6, 3
    probs = rng.dirichlet(np.ones(q), size=n_items)
    full = (rng.random((n_items, n_ann))[:, :, None] > probs.cumsum(axis=1)[:, None, :]).sum(axis=2)
    p_bar = float(lg.spa(lg.Ratings.from_wide(full), "flat"))
    reps = 300
    for weighting in ("flat", "annotations", "annotations_m1", "edges", "inv_var"):
        values = []
        for _ in range(reps):
            keep = rng.integers(2, n_ann + 1, size=n_items)  # annotations kept per item, label-blind
            order = np.argsort(rng.random((n_items, n_ann)), axis=1)
            sparse = full.astype(float)
            sparse[np.take_along_axis(np.arange(n_ann)[None, :].repeat(n_items, 0), order, 1)
                   >= keep[:, None]] = np.nan
            values.append(float(lg.spa(lg.Ratings.from_wide(sparse, categories=list(range(q))), weighting)))
        mean, se = np.mean(values), np.std(values, ddof=1) / np.sqrt(reps)
        assert abs(mean - p_bar) < 4 * se + 1e-9, (weighting, mean, p_bar, se)
