"""The two table inputs: `Ratings.from_contingency` (two raters) and `Ratings.from_counts` (items x categories).

Each is checked against the equivalent long data, against irrCAC (``irrCAC.table.CAC``, the Python port of the
``*.table`` functions, at full precision; the Python port has no ``*.dist`` functions, so count tables are compared
with ``irrCAC.raw.CAC`` on the same ratings laid out one column per rating position, which is what R's ``*.dist``
functions compute) and against the published outputs of R irrCAC's ``*.table`` / ``*.dist`` examples (the
handbook's datasets, bundled with irrCAC).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from irrCAC.datasets import dist_4cat, dist_g1g2, distrib_6raters, table_cont3x3abstractors, table_cont4x4diagnosis
from irrCAC.table import CAC as TABLE_CAC

import labelgate as lg
from labelgate.core.ratings import RaterSlot
from labelgate.metrics.weights import WEIGHTS
from tests.metrics.test_differential import enough, irrcac, same

N_SEEDS = 60


def random_table(rng: np.random.Generator) -> np.ndarray:
    """A q x q contingency table with a strong diagonal, zeros and (sometimes) an unused category."""
    q = int(rng.integers(2, 6))
    table = rng.poisson(rng.uniform(0.2, 3.0), (q, q)) + np.diag(rng.poisson(rng.uniform(0.0, 8.0), q))
    if q > 2 and rng.random() < 0.3:
        unused = int(rng.integers(q))
        table[unused, :] = table[:, unused] = 0
    if table.sum() == 0:
        table[0, 0] = 1
    return table


def random_counts(rng: np.random.Generator) -> np.ndarray:
    """Items x categories counts: unequal numbers of ratings, items rated once or not at all, unused categories."""
    n, q = int(rng.integers(3, 25)), int(rng.integers(2, 6))
    prevalence = rng.dirichlet(np.ones(q) * rng.choice([0.3, 1.0, 5.0]))
    table = np.stack([rng.multinomial(int(rng.integers(0, 7)), prevalence) for _ in range(n)])
    if table.sum() == 0:
        table[0, 0] = 2
    return table


def contingency_long(table: np.ndarray) -> lg.Ratings:
    """The same data as long rows: item i rated by 'x' (rows) and 'y' (columns)."""
    q = table.shape[0]
    rows, cols = np.divmod(np.repeat(np.arange(q * q), table.ravel()), q)
    items = np.arange(rows.size)
    return lg.Ratings.from_long({"item_id": np.concatenate([items, items]),
                                 "rater_id": ["x"] * rows.size + ["y"] * rows.size,
                                 "label": np.concatenate([rows, cols])}, categories=range(q))


def counts_wide(table: np.ndarray) -> np.ndarray:
    """Items x positions: item i's ratings in the first r_i columns (NaN after), rows without rating kept."""
    n = table.sum(axis=1)
    wide = np.full((table.shape[0], max(int(n.max()), 1)), np.nan)
    for i, row in enumerate(table):
        wide[i, :n[i]] = np.repeat(np.arange(table.shape[1]), row)
    return wide


TABLE_METRICS = {"percent_agreement": "pa2", "bennett_s": "bp", "cohen_kappa": "cohen", "scott_pi": "scott",
                 "fleiss_kappa": "scott", "gwet_ac": "gwet", "conger_kappa": "cohen"}


def table_peer(table: np.ndarray, weights: str, method: str) -> dict:
    frame = pd.DataFrame(table, index=range(len(table)), columns=range(len(table)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(TABLE_CAC(frame, weights=weights, digits=15), method)()["est"]


# ------------------------------------------------------------------------------- contingency tables
@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("metric", sorted(TABLE_METRICS))
def test_contingency_table_vs_irrcac_table(metric, weights):
    # irrCAC's table functions number the categories 1..q: LabelGate's positions of nominal categories.
    compared = 0
    function = getattr(lg, metric)
    for seed in range(N_SEEDS):
        table = random_table(np.random.default_rng([21, seed]))
        est = function(lg.Ratings.from_contingency(table), weights)
        if math.isnan(est.value):
            assert est.reason_code == lg.Reason.NO_EXPECTED_DISAGREEMENT  # irrCAC: 0/0
            continue
        peer = table_peer(table, weights, TABLE_METRICS[metric])
        assert same(est.value, peer["coefficient_value"]), (seed, metric, est.value, peer, table.tolist())
        compared += 1
    enough(compared, N_SEEDS * 3 // 4)


@pytest.mark.parametrize("weights", WEIGHTS)
def test_contingency_table_equals_the_long_data(weights):
    for seed in range(N_SEEDS):
        table = random_table(np.random.default_rng([22, seed]))
        a, b = lg.Ratings.from_contingency(table), contingency_long(table)
        np.testing.assert_array_equal(a.item_counts.sum(axis=0), b.item_counts.sum(axis=0))
        np.testing.assert_array_equal(a.rater_counts, b.rater_counts)
        for metric in TABLE_METRICS:
            x, y = getattr(lg, metric)(a, weights), getattr(lg, metric)(b, weights)
            assert same(x.value, y.value), (seed, metric, table.tolist())
        assert same(lg.krippendorff_alpha(a).value, lg.krippendorff_alpha(b).value)


def test_published_contingency_examples():
    # R irrCAC README / vignette on cont3x3abstractors (Gwet 2014), and the Python docstring's quadratic AC2.
    r = lg.Ratings.from_contingency(table_cont3x3abstractors())
    assert r.categories == ("Ectopic", "AIU", "NIU") and (r.n_items, r.n_raters) == (100, 2)
    assert round(lg.cohen_kappa(r).value, 7) == 0.7964094
    assert round(lg.scott_pi(r).value, 7) == 0.7962397
    assert round(lg.gwet_ac(r).value, 7) == 0.8493305
    assert round(lg.bennett_s(r).value, 7) == 0.835
    assert round(lg.percent_agreement(r).value, 7) == 0.89
    assert round(lg.gwet_ac(r, "quadratic").value, 5) == 0.94024


def test_contingency_rows_are_the_first_rater():
    table = table_cont4x4diagnosis()
    r = lg.Ratings.from_contingency(table, raters=("clinical", "research"))
    assert list(r.rater_labels) == ["clinical", "research"]
    np.testing.assert_array_equal(r.rater_counts, np.stack([table.sum(axis=1), table.sum(axis=0)]))


def test_contingency_categories_and_level():
    r = lg.Ratings.from_contingency([[3, 1], [0, 4]], categories=[1.5, 4.0], level="interval")
    assert r.categories == (1.5, 4.0) and r.category_values.tolist() == [1.5, 4.0]
    assert lg.Ratings.from_contingency(np.array([[3, 1], [0, 4]])).categories == (0, 1)


@pytest.mark.parametrize(("table", "kw", "error", "message"), [
    ([[1, 2, 3], [4, 5, 6]], {}, lg.InputError, r"must be square \(q x q\); got 2 x 3"),
    ([[1, -1], [0, 2]], {}, lg.InputError, r"non-negative integer counts; cell \(0, 1\) is -1.0"),
    ([[1, 0.5], [0, 2]], {}, lg.InputError, r"non-negative integer counts; cell \(0, 1\) is 0.5"),
    ([[0, 0], [0, 0]], {}, lg.InputError, r"has no rating"),
    ([1, 2], {}, lg.InputError, r"non-empty 2-D table; got shape \(2,\)"),
    ([["a", "b"], ["c", "d"]], {}, lg.InputError, r"must hold numbers"),
    ([[1, 0], [0, 1]], {"categories": ["a", "b", "c"]}, lg.ParameterError, r"'categories' has 3 entries but the "
                                                                            r"table has 2"),
    ([[1, 0], [0, 1]], {"categories": ["a", "a"]}, lg.ParameterError, r"duplicates"),
    ([[1, 0], [0, 1]], {"categories": ["a", "b"], "level": "interval"}, lg.InputError,
     r"'categories' has the non-numeric value 'a'"),
    ([[1, 0], [0, 1]], {"raters": ("x", "x")}, lg.ParameterError, r"two distinct labels"),
])
def test_bad_contingency_tables_raise(table, kw, error, message):
    with pytest.raises(error, match=message):
        lg.Ratings.from_contingency(table, **kw)


def test_a_dataframe_with_different_rows_and_columns_needs_categories():
    frame = pd.DataFrame([[1, 0], [0, 1]], index=["a", "b"], columns=["b", "a"])
    with pytest.raises(lg.InputError, match=r"rows \['a', 'b'\] and columns \['b', 'a'\] must list the same"):
        lg.Ratings.from_contingency(frame)
    assert lg.Ratings.from_contingency(frame, categories=["a", "b"]).categories == ("a", "b")


# ------------------------------------------------------------------------------------ count tables
COUNT_METRICS = ("percent_agreement", "bennett_s", "fleiss_kappa", "scott_pi", "gwet_ac")


@pytest.mark.parametrize("weights", WEIGHTS)
def test_count_table_equals_the_long_data(weights):
    compared = 0
    for seed in range(N_SEEDS):
        table = random_counts(np.random.default_rng([23, seed]))
        a = lg.Ratings.from_counts(table)
        b = lg.Ratings.from_wide(counts_wide(table), categories=range(table.shape[1]))
        np.testing.assert_array_equal(a.item_counts, b.item_counts[b.ratings_per_item > 0])
        for metric in COUNT_METRICS:
            x, y = getattr(lg, metric)(a, weights, ci=0.9, n_boot=50, seed=1), getattr(lg, metric)(b, weights)
            assert same(x.value, y.value), (seed, metric, table.tolist())
            assert x.reason_code == y.reason_code
            compared += not math.isnan(x.value)
    assert compared >= N_SEEDS * len(COUNT_METRICS) // 2


def test_count_table_equals_the_long_data_for_the_unweighted_metrics():
    for seed in range(N_SEEDS):
        table = random_counts(np.random.default_rng([24, seed]))
        a = lg.Ratings.from_counts(table)
        b = lg.Ratings.from_wide(counts_wide(table), categories=range(table.shape[1]))
        for metric in ("krippendorff_alpha", "spa"):
            assert same(getattr(lg, metric)(a).value, getattr(lg, metric)(b).value), (seed, metric)
        sa, sb = lg.specific_agreement(a), lg.specific_agreement(b)
        assert all(same(sa[k].value, sb[k].value) for k in sa)


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("method", ["gwet", "fleiss", "bp"])
def test_count_table_vs_irrcac(method, weights):
    function = {"gwet": lg.gwet_ac, "fleiss": lg.fleiss_kappa, "bp": lg.bennett_s}[method]
    compared = 0
    for seed in range(N_SEEDS):
        table = random_counts(np.random.default_rng([25, seed]))
        est = function(lg.Ratings.from_counts(table), weights)
        rated = table.sum(axis=1) > 0
        if math.isnan(est.value) or rated.sum() < 2:
            continue
        # irrCAC weights come from category values: positions 1..q are the ranks LabelGate uses
        peer = irrcac(counts_wide(table[rated]) + 1.0, [float(k + 1) for k in range(table.shape[1])], weights,
                      method)
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, table.tolist())
        assert same(est.details["p_o"], peer["pa"])
        compared += 1
    enough(compared, N_SEEDS // 2)


def test_published_count_table_examples():
    # R irrCAC README on distrib.6raters (Fleiss 1971's data) and cac.dist4cat[, 2:4] (Gwet 2014).
    r = lg.Ratings.from_counts(distrib_6raters())
    assert (r.n_items, r.n_ratings, r.n_raters) == (15, 90, 6)
    ac1 = lg.gwet_ac(r)
    assert round(ac1.value, 7) == 0.4448007
    assert round(ac1.details["p_o"], 7) == 0.5511111 and round(ac1.details["p_e"], 7) == 0.1914815
    fleiss = lg.fleiss_kappa(r)
    assert round(fleiss.value, 7) == 0.4139265 and round(fleiss.details["p_e"], 7) == 0.2340741
    assert round(lg.krippendorff_alpha(r).value, 7) == 0.4204384
    assert round(lg.bennett_s(r).value, 7) == 0.4388889
    assert round(lg.gwet_ac(lg.Ratings.from_counts(dist_4cat().reset_index(drop=True))).value, 7) == 0.3518903


def test_count_table_labels_and_dropped_rows():
    frame = pd.DataFrame({"no": [2, 0, 1], "yes": [1, 0, 0]}, index=["i1", "i2", "i3"])
    r = lg.Ratings.from_counts(frame)
    assert r.categories == ("no", "yes") and list(r.item_labels) == ["i1", "i3"]
    assert r.item_counts.tolist() == [[2, 1], [1, 0]] and r.ratings_per_item.tolist() == [3, 1]
    assert list(r.rater_labels) == [RaterSlot(0), RaterSlot(1), RaterSlot(2)]
    assert lg.Ratings.from_counts(frame, categories=[0, 1], level="ordinal").categories == (0, 1)


def test_count_table_ids_must_be_unique_and_may_be_tuples():
    with pytest.raises(lg.InputError, match=r"index has the item id 'A' more than once"):
        lg.Ratings.from_counts(dist_4cat())  # its index is the group of each subject
    r = lg.Ratings.from_counts(dist_g1g2())  # a (group, unit) MultiIndex
    assert r.n_items == 14 and r.item_labels[0] == ("G2", 1)


@pytest.mark.parametrize("function", [lg.conger_kappa, lg.cohen_kappa])
def test_rater_specific_coefficients_refuse_count_tables(function):
    r = lg.Ratings.from_counts([[2, 0], [1, 1], [0, 2]])  # two ratings per item: looks like two raters
    with pytest.raises(lg.DesignError, match=f"{function.__name__} needs to know which rater gave each rating"
                                             r".*Ratings.from_counts") as info:
        function(r)
    assert info.value.code == lg.Reason.INCOMPATIBLE_RATINGS
    with pytest.raises(lg.DesignError, match="no rater identity"):
        function(r.subset_items([0, 1]))  # the placeholder raters survive derived Ratings


@pytest.mark.parametrize(("counts", "kw", "error", "message"), [
    ([[1, -2]], {}, lg.InputError, r"cell \(0, 1\) is -2.0"),
    ([[1, np.nan]], {}, lg.InputError, r"cell \(0, 1\) is nan"),
    ([[0, 0]], {}, lg.InputError, r"has no rating"),
    ([[1, 2]], {"categories": ["a"]}, lg.ParameterError, r"'categories' has 1 entries but the table has 2"),
    ([[1, 2]], {"level": "ratio", "categories": [-1, 2]}, lg.InputError, r"non-negative"),
])
def test_bad_count_tables_raise(counts, kw, error, message):
    with pytest.raises(error, match=message):
        lg.Ratings.from_counts(counts, **kw)


# ------------------------------------------------------------- long tables without a rater column (rater=None)
def _pairs_frame(seed: int) -> pd.DataFrame:
    """(item, label) rows in a random order: 1-4 ratings per item, some labels missing, unused categories."""
    rng = np.random.default_rng(seed)
    rows = [(f"it{i}", float(rng.integers(0, 4)) if rng.random() > 0.1 else None)
            for i in range(40) for _ in range(int(rng.integers(1, 5)))]
    frame = pd.DataFrame(rows, columns=["item_id", "label"])
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)


@pytest.mark.parametrize("seed", range(5))
def test_long_table_without_raters_equals_any_rater_ids(seed):
    frame = _pairs_frame(seed)
    anonymous = lg.Ratings.from_long(frame, rater=None, categories=[0.0, 1.0, 2.0, 3.0, 4.0])
    # any rater ids that differ within an item give the same coefficients that need no rater identity
    named = frame.assign(rater_id=[f"r{k}" for k in range(len(frame))])
    explicit = lg.Ratings.from_long(named, categories=[0.0, 1.0, 2.0, 3.0, 4.0])
    assert anonymous.n_items == explicit.n_items and anonymous.n_ratings == explicit.n_ratings
    assert anonymous.n_dropped_missing == int(frame["label"].isna().sum())
    assert anonymous.item_counts.tolist() == explicit.item_counts.tolist()
    for function in (lg.percent_agreement, lg.bennett_s, lg.fleiss_kappa, lg.gwet_ac, lg.krippendorff_alpha, lg.spa):
        assert float(function(anonymous)) == pytest.approx(float(function(explicit)), abs=1e-12), function
    assert float(lg.cross_kappa(anonymous, explicit)) == pytest.approx(
        float(lg.cross_kappa(explicit, explicit)), abs=1e-12)


def test_long_table_without_raters_numbers_them_within_each_item_in_row_order():
    frame = pd.DataFrame({"item_id": ["a", "b", "a", "c", "b", "a"], "label": ["x", "y", None, "z", "y", "x"]})
    r = lg.Ratings.from_long(frame, rater=None)
    assert list(r.item_labels) == ["a", "b", "c"] and r.n_dropped_missing == 1
    judgements = sorted(zip(r.item_labels[r.item_codes], r.rater_labels[r.rater_codes],
                            np.asarray(r.categories)[r.value_codes], strict=True))
    # the missing label leaves no gap: item a's second labelled row is its slot 1
    assert judgements == [("a", 0, "x"), ("a", 1, "x"), ("b", 0, "y"), ("b", 1, "y"), ("c", 0, "z")]
    assert all(isinstance(label, RaterSlot) for label in r.rater_labels) and r.n_raters == 2
    for function in (lg.conger_kappa, lg.cohen_kappa):
        with pytest.raises(lg.DesignError, match=r"no rater identity.*from_long\(rater=None\)"):
            function(r)


def test_long_table_without_raters_checks_its_columns():
    with pytest.raises(lg.InputError, match="Column 'label' has a missing value") as info:
        lg.Ratings.from_long({"item_id": ["a", "b"], "label": ["x", None]}, rater=None, missing="error")
    assert info.value.code is lg.Reason.MISSING_VALUE
    with pytest.raises(lg.InputError, match="Column 'item_id' has a missing id"):
        lg.Ratings.from_long({"item_id": ["a", None], "label": ["x", "y"]}, rater=None)
    with pytest.raises(lg.InputError, match="'rater_id' .* is missing"):  # the default still wants the column
        lg.Ratings.from_long({"item_id": ["a", "b"], "label": ["x", "y"]})
    with pytest.raises(lg.InputError, match="Column 'answer'"):
        lg.Ratings.from_long({"item_id": ["a"], "label": ["x"]}, rater=None, value="answer")


# ------------------------------------------------------------- non-integer (weighted) count tables
def _weighted_table(seed: int, n: int = 40, q: int = 4, raters: int = 3, parts: int = 4) -> np.ndarray:
    """Counts in 1/parts steps with equal row totals (statsmodels' fleiss_kappa needs them)."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(q))
    return rng.multinomial(raters * parts, p, size=n) / parts


def _alpha_oracle(table: np.ndarray) -> float:
    """Nominal α, literally: coincidences o_ck = Σ_i (n_ic n_ik - δ_ck n_ic) / (n_i - 1) over pairable items."""
    n_i = table.sum(axis=1)
    on = table[n_i >= 2]
    coincidences = sum((np.outer(row, row) - np.diag(row)) / (row.sum() - 1) for row in on)
    n_c = coincidences.sum(axis=1)
    n = n_c.sum()
    off = 1 - np.eye(len(n_c))
    return 1 - (n - 1) * (coincidences * off).sum() / (np.outer(n_c, n_c) * off).sum()


@pytest.mark.parametrize("seed", range(6))
def test_weighted_counts_equal_statsmodels_fleiss_kappa(seed):
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

    table = _weighted_table(seed)
    r = lg.Ratings.from_counts(table)
    assert r.weighted and r.n_ratings == round(table.sum())
    assert lg.fleiss_kappa(r).value == pytest.approx(sm_fleiss_kappa(table), abs=1e-12)
    assert lg.scott_pi(r).value == pytest.approx(sm_fleiss_kappa(table), abs=1e-12)
    assert lg.bennett_s(r).value == pytest.approx(sm_fleiss_kappa(table, method="randolph"), abs=1e-12)
    assert lg.krippendorff_alpha(r).value == pytest.approx(_alpha_oracle(table), abs=1e-12)
    # statsmodels' observed agreement is percent agreement
    n_rat = table.sum(axis=1)[0]
    p_mean = ((table**2).sum(axis=1) - n_rat).mean() / (n_rat * (n_rat - 1))
    assert lg.percent_agreement(r).value == pytest.approx(p_mean, abs=1e-12)
    assert math.isfinite(lg.gwet_ac(r, "linear").value)
    est = lg.fleiss_kappa(r, ci=0.9, n_boot=200, seed=3)
    assert est.ci is not None and est.ci[0] <= est.value <= est.ci[1]


def test_weighted_counts_with_unequal_row_totals_follow_the_handbook_formulas():
    table = np.array([[1.5, 0.5, 0.0], [0.0, 2.25, 0.75], [1.0, 1.0, 1.0], [0.0, 0.0, 2.5]])
    r = lg.Ratings.from_counts(table)
    n_i = table.sum(axis=1)
    p_a = (((table**2).sum(axis=1) - n_i) / (n_i * (n_i - 1))).mean()
    pi = (table / n_i[:, None]).mean(axis=0)
    p_e = (pi**2).sum()
    assert lg.fleiss_kappa(r).value == pytest.approx((p_a - p_e) / (1 - p_e), abs=1e-12)
    assert lg.krippendorff_alpha(r).value == pytest.approx(_alpha_oracle(table), abs=1e-12)


def test_integer_valued_floats_are_an_ordinary_count_table():
    table = np.array([[2.0, 1.0], [0.0, 3.0], [1.0, 1.0]])
    r = lg.Ratings.from_counts(table)
    assert not r.weighted and r.item_counts.dtype == np.int64
    assert lg.fleiss_kappa(r).value == lg.fleiss_kappa(lg.Ratings.from_counts(table.astype(int))).value


def test_coefficients_not_defined_on_weighted_counts_refuse_them():
    r = lg.Ratings.from_counts(_weighted_table(7), level="interval", categories=[1, 2, 3, 4])
    refusals = {lg.specific_agreement: "specific_agreement is not defined on a count table with non-integer",
                lg.spa: "spa is not defined on a count table with non-integer",
                lg.conger_kappa: "no rater identity",
                lg.icc: "no rater identity",
                lambda r: lg.icc(r, "1"): "non-integer \\(weighted\\) counts, which has no single judgements",
                lg.item_icc: "no single judgements"}
    for function, message in refusals.items():
        with pytest.raises(lg.DesignError, match=message):
            function(r)
    with pytest.raises(lg.DesignError, match="cross_kappa is not defined on a count table with non-integer"):
        lg.cross_kappa(r, lg.Ratings.from_counts([[1, 2, 0, 0]], level="interval", categories=[1, 2, 3, 4]))


def test_weighted_aggregated_rows_and_bad_weighted_counts():
    r = lg.Ratings.from_aggregates([0, 0, 1], [0, 1, 1], [1.5, 0.5, 2.0], item_labels=["a", "b"],
                                   categories=["n", "p"])
    assert r.weighted and r.item_counts.tolist() == [[1.5, 0.5], [0.0, 2.0]]
    with pytest.raises(lg.InputError, match=r"non-negative finite counts; cell \(0, 1\) is -0.5"):
        lg.Ratings.from_counts([[1, -0.5], [0, 2]])
    with pytest.raises(lg.InputError, match=r"non-negative finite counts; cell \(1, 0\) is inf"):
        lg.Ratings.from_counts([[1, 0.5], [np.inf, 2]])
    with pytest.raises(lg.InputError, match="non-finite count nan at row 1"):
        lg.Ratings.from_aggregates([0, 1], [0, 1], [1.0, np.nan], item_labels=["a", "b"], categories=["n", "p"])


def test_label_sets_without_a_rater_column_are_refused_naming_both():
    frame = {"item_id": [1, 1], "label": [["a"], ["a", "b"]]}
    with pytest.raises(lg.InputError, match=r"label sets \(level 'set'\) need a rater column") as err:
        lg.Ratings.from_long(frame, rater=None, level="set", distance="jaccard")
    assert err.value.code == lg.Reason.MISSING_COLUMN
