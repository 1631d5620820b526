"""The worked examples of Gwet's *Handbook of Inter-Rater Reliability* (4th ed., 2014), as bundled by irrCAC.

``irrCAC.datasets`` ships the handbook's example data: ``raw_4raters`` (4 raters x 12 units, 5 categories,
one unit rated once) and ``raw_g1g2`` (4 raters x 14 units, categories a-e, missing ratings). The expected
values are the handbook's, at three decimals (AC1 0.775 / Conger 0.763 / Fleiss 0.761 on the first;
AC1 0.685 / Conger 0.659 / Fleiss 0.657 on the second); every one is also checked against irrCAC itself at
full precision (``CAC(..., digits=15)``), with every weighting. The data have items with a single rating and
unequal numbers of ratings per item, so they pin the handbook's treatment of missing ratings: ``p_a`` over the
items with two or more ratings, the chance-agreement marginals over every rated item.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import pytest
from irrCAC.datasets import raw_4raters, raw_g1g2
from irrCAC.raw import CAC

import labelgate as lg
from labelgate.metrics._engine import evaluate
from labelgate.metrics.agreement import build_fleiss_kappa

TOL = 1e-9
CATEGORIES = {"raw_4raters": [1.0, 2.0, 3.0, 4.0, 5.0], "raw_g1g2": ["a", "b", "c", "d", "e"]}
DATA = {"raw_4raters": raw_4raters, "raw_g1g2": raw_g1g2}

# dataset -> weights -> (AC1/AC2, Conger, Fleiss, Brennan-Prediger, percent agreement), three decimals
EXPECTED = {
    "raw_4raters": {"identity": (0.775, 0.763, 0.761, 0.773, 0.818),
                    "linear": (0.859, 0.814, 0.818, 0.848, 0.939),
                    "quadratic": (0.914, 0.858, 0.865, 0.902, 0.975)},
    "raw_g1g2": {"identity": (0.685, 0.659, 0.657, 0.679, 0.744),
                 "linear": (0.817, 0.738, 0.744, 0.800, 0.920),
                 "quadratic": (0.901, 0.809, 0.820, 0.881, 0.970)},
}
IRRCAC = ("gwet", "conger", "fleiss", "bp")


def ratings(name: str) -> lg.Ratings:
    # ordinal: linear/quadratic weights on the ranks, which for these equally spaced scales are the handbook's
    return lg.Ratings.from_wide(DATA[name](), categories=CATEGORIES[name], level="ordinal")


def coefficients(r: lg.Ratings, weights: str) -> tuple[lg.Estimate, ...]:
    fleiss = evaluate("fleiss_kappa", build_fleiss_kappa(r, weights=weights), ci=None, n_boot=0, seed=None)
    return (lg.gwet_ac(r, weights), lg.conger_kappa(r, weights), fleiss, lg.bennett_s(r, weights),
            lg.percent_agreement(r, weights))


def irrcac(name: str, weights: str, method: str) -> dict:
    data, cats = DATA[name](), CATEGORIES[name]
    if name == "raw_g1g2":  # irrCAC's weights need numbers: the ranks 1..5 of a..e (equally spaced, as ours)
        data = data.replace({c: float(k + 1) for k, c in enumerate(cats)})
        cats = [float(k + 1) for k in range(len(cats))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(CAC(data, weights=weights, categories=cats, digits=15), method)()["est"]


@pytest.mark.parametrize("weights", ["identity", "linear", "quadratic"])
@pytest.mark.parametrize("name", sorted(DATA))
def test_handbook_values_at_three_decimals(name, weights):
    got = [round(est.value, 3) for est in coefficients(ratings(name), weights)]
    assert got == list(EXPECTED[name][weights])


@pytest.mark.parametrize("weights", ["identity", "linear", "quadratic"])
@pytest.mark.parametrize("name", sorted(DATA))
def test_handbook_examples_equal_irrcac_at_full_precision(name, weights):
    ests = coefficients(ratings(name), weights)
    for est, method in zip(ests, IRRCAC, strict=False):
        peer = irrcac(name, weights, method)
        assert math.isclose(est.value, peer["coefficient_value"], rel_tol=TOL), (method, est, peer)
        assert math.isclose(est.details["p_o"], peer["pa"], rel_tol=TOL), method
        assert math.isclose(est.details["p_e"], peer["pe"], rel_tol=TOL), method
    assert math.isclose(ests[-1].value, irrcac(name, weights, "gwet")["pa"], rel_tol=TOL)


def test_single_rated_unit_enters_the_marginals_not_the_agreement():
    # raw_4raters: unit 12 has one rating (3 by rater 3); 11 units are pairable.
    est = lg.gwet_ac(ratings("raw_4raters"))
    assert (est.n_items, est.n_items_excluded, est.details["n_marginal_items"]) == (11, 1, 12)
    old = lg.gwet_ac(ratings("raw_4raters"), marginals="pairable_items")
    assert old.details["n_marginal_items"] == 11
    assert old.details["p_o"] == est.details["p_o"] and old.details["p_e"] != est.details["p_e"]


@pytest.mark.parametrize(("metric", "old"), [(lg.gwet_ac, 0.6845), (lg.conger_kappa, 0.6576),
                                             (lg.fleiss_kappa, 0.6529)])
def test_pairable_items_marginals_keep_the_previous_values(metric, old):
    # LabelGate's values before the handbook definition became the default (issue 16)
    assert round(metric(ratings("raw_g1g2"), marginals="pairable_items").value, 4) == old


@pytest.mark.parametrize("metric", [lg.gwet_ac, lg.conger_kappa, lg.fleiss_kappa, lg.scott_pi])
def test_bootstrap_resamples_every_rated_item(metric: Callable[..., lg.Estimate]):
    # The statistic depends on the single-rated units too, so the item bootstrap resamples all rated units; the
    # vectorised bootstrap is reproducible and its interval brackets the value.
    r = ratings("raw_g1g2")
    first = metric(r, ci=0.95, n_boot=400, seed=7)
    again = metric(r, ci=0.95, n_boot=400, seed=7)
    assert first.ci == again.ci and first.ci is not None
    assert first.ci[0] <= first.value <= first.ci[1]
    pairable = metric(r, marginals="pairable_items", ci=0.95, n_boot=400, seed=7)
    assert pairable.ci != first.ci


def test_bad_marginals_option_names_the_parameter():
    r = ratings("raw_4raters")
    for metric in (lg.gwet_ac, lg.conger_kappa, lg.fleiss_kappa, lg.scott_pi):
        with pytest.raises(lg.ParameterError, match="'marginals' parameter"):
            metric(r, marginals="pairable")

