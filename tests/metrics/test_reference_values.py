"""Every worked example of ``shared/reference-values.md`` that concerns the metrics core.

Each test names the seed document and the slide / section the value is printed in.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import labelgate as lg

# Girard, "Inter-rater reliability" slides (seeds/girard-inter-rater-reliability-slides.txt)
GIRARD_TWO = [[1, 1], [0, 1], [0, 0], [1, 0], [1, 1], [0, 1], [1, 1], [0, 0], [0, 0], [1, 1]]
GIRARD_THREE = [[2, 2, 2], [1, 3, 1], [3, 3, 3], [1, 2, 2], [1, 1, 1],
                [1, 2, 2], [1, 1, 1], [3, 3, 3], [2, 2, 3], [2, 2, 2]]
GIRARD_FIVE = [[2, 2, 3, 2, 2], [2, 2, 2, 2, 2], [2, np.nan, 2, 2, 1], [1, 2, 2, 2, 2]]


def girard_five() -> lg.Ratings:
    return lg.Ratings.from_wide(GIRARD_FIVE, categories=[1, 2, 3], level="ordinal")


def test_girard_two_raters_two_categories_percent_agreement():
    # slide "Agreement: Two raters and two categories": M = .70
    r = lg.Ratings.from_wide(GIRARD_TWO)
    assert float(lg.percent_agreement(r)) == pytest.approx(0.70, abs=1e-12)


@pytest.mark.parametrize(("pair", "expected"), [((0, 1), 0.70), ((0, 2), 0.70), ((1, 2), 0.80)])
def test_girard_three_raters_pairwise(pair, expected):
    # slide "Agreement: Many raters and categories": R1-R2 .70, R1-R3 .70, R2-R3 .80
    data = np.asarray(GIRARD_THREE)[:, list(pair)]
    assert float(lg.percent_agreement(lg.Ratings.from_wide(data))) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("weights", "expected"), [("identity", 0.7333), ("linear", 0.8333)])
def test_girard_three_raters_overall(weights, expected):
    # slides "Many raters and categories" (M = .73) and "Ordered categories" (linear, M = .83)
    r = lg.Ratings.from_wide(GIRARD_THREE, categories=[1, 2, 3], level="ordinal")
    assert float(lg.percent_agreement(r, weights)) == pytest.approx(expected, abs=5e-5)


@pytest.mark.parametrize(("weights", "expected", "per_object"),
                         [("identity", 0.675, [0.6, 1.0, 0.5, 0.6]),
                          ("linear", 0.8375, [0.8, 1.0, 0.75, 0.8]),
                          ("quadratic", 0.91875, [0.9, 1.0, 0.875, 0.9])])
def test_girard_five_raters_percent_agreement(weights, expected, per_object):
    # slide "Agreement: Generalized function": 0.675 / 0.838 / 0.919 (mAGREE); per-object shares from
    # reference-values.md
    assert float(lg.percent_agreement(girard_five(), weights)) == pytest.approx(expected, abs=1e-12)
    assert np.mean(per_object) == pytest.approx(expected, abs=1e-12)


def test_girard_bennett_s():
    # slide "mSSCORE": chance 0.333, S = 0.513
    est = lg.bennett_s(girard_five())
    assert est.details["p_e"] == pytest.approx(1 / 3, abs=1e-12)
    assert float(est) == pytest.approx(0.5125, abs=1e-12)
    assert round(float(est), 3) == 0.513


def test_girard_cohen_multi_rater():
    # slide "mKAPPA": chance agreement 0.725, Cohen's kappa -0.182 (rater-specific marginals)
    est = lg.conger_kappa(girard_five())
    assert est.details["p_o"] == pytest.approx(0.675, abs=1e-12)
    assert est.details["p_e"] == pytest.approx(0.725, abs=1e-12)
    assert float(est) == pytest.approx(-0.05 / 0.275, abs=1e-12)
    assert round(float(est), 3) == -0.182


def test_girard_specific_agreement():
    # slide "mSPECIFIC": 0.000 / 0.820 / 0.000; category 2 = 50/61 (reference-values.md)
    sa = lg.specific_agreement(girard_five())
    assert float(sa[1]) == 0.0
    assert float(sa[2]) == pytest.approx(50 / 61, abs=1e-12)
    assert float(sa[3]) == 0.0


def blog_replications() -> tuple[lg.Ratings, lg.Ratings]:
    """Four items, two groups of two raters, binary labels (the blog prints no data).

    Constructed so that the 16 within-item cross-group pairs hold 4 disagreements (d_o = 0.25) and
    the 64 cross-group pairs over all item pairs hold 28 (X has two 1s, Y three: 2*5 + 6*3 = 28).
    """
    x = lg.Ratings.from_wide([[1, 0], [1, 0], [0, 0], [0, 0]])
    y = lg.Ratings.from_wide([[1, 1], [1, 0], [0, 0], [0, 0]])
    return x, y


def test_blog_cross_kappa_example():
    # blog "Computing xRR": d_o = 0.25 (16 pairs), d_e = 0.4375 (64 pairs), kappa_x "close to 0.43"
    est = lg.cross_kappa(*blog_replications())
    assert est.details["d_o"] == pytest.approx(0.25, abs=1e-12)
    assert est.details["d_e"] == pytest.approx(0.4375, abs=1e-12)
    assert float(est) == pytest.approx(1 - 0.25 / 0.4375, abs=1e-12)
    assert round(float(est), 2) == 0.43


def test_xrr_one_annotation_per_item_is_cohen():
    # xRR paper §3.2: with one annotation per item in each replication, kappa_x = Cohen's kappa
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 3, 40), rng.integers(0, 3, 40)
    b[:25] = a[:25]
    x, y = lg.Ratings.from_wide(a[:, None]), lg.Ratings.from_wide(b[:, None])
    both = lg.Ratings.from_wide(np.column_stack([a, b]))
    assert float(lg.cross_kappa(x, y)) == pytest.approx(float(lg.cohen_kappa(both)), abs=1e-12)


def test_xrr_table5_normalisation_arithmetic_and_no_clipping():
    # xRR paper Table 5, shame, MC x Bud: 0.106 / sqrt(0.0192 * 0.1261) = 2.154 — eq. 13 can exceed 1
    assert 0.106 / math.sqrt(0.0192 * 0.1261) == pytest.approx(2.154, abs=5e-4)
    # the same situation on data: small IRRs, kappa_x comparatively large -> reported above 1, not clipped
    x = lg.Ratings.from_wide([[1, 1], [0, 0], [0, 0], [1, 0], [1, 1], [0, 1], [1, 0], [0, 1]])
    y = lg.Ratings.from_wide([[1, 1], [0, 0], [0, 1], [1, 1], [1, 1], [0, 0], [1, 1], [0, 0]])
    est = lg.normalized_cross_kappa(x, y)
    d = est.details
    assert float(est) == pytest.approx(d["cross_kappa"] / math.sqrt(d["irr_x"] * d["irr_y"]), abs=1e-12)
    assert float(est) > 1.0


def test_spa_figure_1():
    # SPA paper Fig. 1: one item, 11 annotations 5/3/2/1 -> 14 agreeing pairs of 55
    r = lg.Ratings.from_wide([["b"] * 5 + ["r"] * 3 + ["g"] * 2 + ["p"]])
    for weighting in ("flat", "annotations", "annotations_m1", "edges", "inv_var", "inv_var_class"):
        assert float(lg.spa(r, weighting)) == pytest.approx(14 / 55, abs=1e-12)


def test_phi_demo_table_alpha_and_percent_agreement():
    # reference-values.md (Checco et al. slides' demo table): on `1 3 3 2 2 / 3 3 5 5 1 / 4 2 2 5 4 /
    # 4 2 3 1 4` alpha is 0.008 nominal / -0.016 ordinal / -0.009 interval / -0.062 ratio and percent
    # agreement 0.175 (the slide's printed results belong to another table and are not used).
    table = [[1, 3, 3, 2, 2], [3, 3, 5, 5, 1], [4, 2, 2, 5, 4], [4, 2, 3, 1, 4]]
    expected = {"nominal": 0.008, "ordinal": -0.016, "interval": -0.009, "ratio": -0.062}
    for level, value in expected.items():
        r = lg.Ratings.from_wide(table, level=level)
        assert round(float(lg.krippendorff_alpha(r)), 3) == value
    assert round(float(lg.percent_agreement(lg.Ratings.from_wide(table))), 3) == 0.175
