"""Coefficients on label sets (level "set"): α against the textbook coincidence form and NLTK, κx and normalized κx
against a brute-force enumeration of xRR eq. 9-11 and 13, percent agreement against its pair definition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import labelgate as lg

CELL_TYPES = (list, tuple, set, frozenset)


def set_distance(name, a, b):
    """Jaccard and MASI written out (Passonneau 2006), 0 between two empty sets."""
    if not a and not b:
        return 0.0
    inter, union = len(a & b), len(a | b)
    if name == "jaccard":
        return 1.0 - inter / union
    weight = 1.0 if a == b else 2 / 3 if inter == min(len(a), len(b)) else 1 / 3 if inter else 0.0
    return 1.0 - inter / union * weight


def distance_of(name):
    return lambda a, b: set_distance(name, frozenset(a), frozenset(b))


def nltk_distance_of(name):
    module = pytest.importorskip("nltk.metrics.distance")  # a test-only dependency (the test extra)
    reference = {"jaccard": module.jaccard_distance, "masi": module.masi_distance}[name]

    def d(a, b):  # NLTK's distances divide by zero on two empty sets, whose distance is 0 by definition
        return 0.0 if not a and not b else reference(set(a), set(b))
    return d


def random_sets(seed, n_items=40, max_raters=4, elements="abcd", missing=0.1):
    """Rows (item, rater, set or None) of a sparse random design: single-rated items, empty sets, missing cells."""
    rng = np.random.default_rng(seed)
    rows = []
    for item in range(n_items):
        truth = frozenset(rng.choice(list(elements), size=rng.integers(0, 4), replace=False).tolist())
        for rater in rng.choice(6, size=rng.integers(1, max_raters + 1), replace=False):
            if rng.random() < missing:
                rows.append((item, f"r{rater}", None))
                continue
            if rng.random() < 0.6:  # a rater mostly gives the item's set: the coefficients are positive
                rows.append((item, f"r{rater}", truth))
                continue
            size = rng.integers(0, 3)
            rows.append((item, f"r{rater}", frozenset(rng.choice(list(elements), size=size, replace=False).tolist())))
    return rows


def as_table(rows, seed=0):
    rng = np.random.default_rng(seed)
    cells = [None if s is None else CELL_TYPES[rng.integers(4)](sorted(s)) for _, _, s in rows]
    return {"item_id": [i for i, _, _ in rows], "rater_id": [r for _, r, _ in rows], "label": cells}


def by_item(rows):
    out = {}
    for item, _, s in rows:
        if s is not None:
            out.setdefault(item, []).append(s)
    return out


def alpha_oracle(rows, d):
    """Krippendorff's α in the coincidence form: D_o over ordered pairs within units, D_e over all pairs."""
    units = [v for v in by_item(rows).values() if len(v) >= 2]
    values = [s for v in units for s in v]
    n = len(values)
    d_o = sum(d(u[a], u[b]) / (len(u) - 1) for u in units for a in range(len(u)) for b in range(len(u)) if a != b) / n
    d_e = sum(d(values[a], values[b]) for a in range(n) for b in range(n) if a != b) / (n * (n - 1))
    return 1.0 - d_o / d_e


def cross_kappa_oracle(x_rows, y_rows, d):
    """xRR eq. 9-11 by enumeration."""
    xs, ys = by_item(x_rows), by_item(y_rows)
    common = sorted(set(xs) & set(ys))
    big_r, big_s = sum(len(xs[i]) for i in common), sum(len(ys[i]) for i in common)
    d_o = sum((len(xs[i]) + len(ys[i])) / (big_r + big_s) * sum(d(a, b) for a in xs[i] for b in ys[i])
              / (len(xs[i]) * len(ys[i])) for i in common)
    every_x = [a for i in common for a in xs[i]]
    every_y = [b for j in common for b in ys[j]]
    d_e = sum(d(a, b) for a in every_x for b in every_y) / (big_r * big_s)
    return 1.0 - d_o / d_e, common


@pytest.mark.parametrize("distance", ["jaccard", "masi"])
@pytest.mark.parametrize("seed", range(6))
def test_alpha_equals_the_coincidence_form_and_nltk(seed, distance):
    rows = random_sets(seed)
    r = lg.Ratings.from_long(as_table(rows, seed), level="set", distance=distance)
    value = lg.krippendorff_alpha(r).value
    assert value == pytest.approx(alpha_oracle(rows, distance_of(distance)), abs=1e-9)
    task = pytest.importorskip("nltk.metrics.agreement").AnnotationTask
    nltk_alpha = task([(rater, item, s) for item, rater, s in rows if s is not None],
                      distance=nltk_distance_of(distance)).alpha()
    assert value == pytest.approx(nltk_alpha, abs=1e-9)


@pytest.mark.parametrize("distance", ["jaccard", "masi"])
@pytest.mark.parametrize("seed", range(4))
def test_cross_kappa_and_normalized_cross_kappa_equal_the_enumeration(seed, distance):
    x_rows, y_rows = random_sets(seed, n_items=30), random_sets(seed + 100, n_items=36)
    d = distance_of(distance)
    x = lg.Ratings.from_long(as_table(x_rows, seed), level="set", distance=distance)
    y = lg.Ratings.from_long(as_table(y_rows, seed + 1), level="set", distance=distance)  # other set lists
    kappa, common = cross_kappa_oracle(x_rows, y_rows, d)
    assert lg.cross_kappa(x, y).value == pytest.approx(kappa, abs=1e-9)
    on_common = [[row for row in rows if row[0] in set(common)] for rows in (x_rows, y_rows)]
    expected = kappa / math.sqrt(alpha_oracle(on_common[0], d) * alpha_oracle(on_common[1], d))
    assert lg.normalized_cross_kappa(x, y).value == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("distance", ["jaccard", "masi"])
def test_pools_of_one_table_give_the_same_cross_kappa(distance):
    x_rows, y_rows = random_sets(7, n_items=30), random_sets(8, n_items=30)
    table = {k: v + w for (k, v), w in zip(as_table(x_rows).items(), as_table(y_rows).values(), strict=True)}
    table["pool"] = ["x"] * len(x_rows) + ["y"] * len(y_rows)
    pools = lg.ratings_by_pool(table, level="set", distance=distance)
    kappa, _ = cross_kappa_oracle(x_rows, y_rows, distance_of(distance))
    assert lg.cross_kappa(pools["x"], pools["y"]).value == pytest.approx(kappa, abs=1e-9)


@pytest.mark.parametrize("distance", ["jaccard", "masi"])
@pytest.mark.parametrize("seed", range(3))
def test_percent_agreement_gives_each_pair_the_credit_one_minus_the_distance(seed, distance):
    rows = random_sets(seed)
    d = distance_of(distance)
    r = lg.Ratings.from_long(as_table(rows, seed), level="set", distance=distance)
    units = [v for v in by_item(rows).values() if len(v) >= 2]
    expected = np.mean([np.mean([1.0 - d(u[a], u[b]) for a in range(len(u)) for b in range(len(u)) if a != b])
                        for u in units])
    assert lg.percent_agreement(r).value == pytest.approx(expected, abs=1e-12)
    exact = lg.percent_agreement(r, weights=np.eye(r.n_categories)).value  # a matrix overrides: equal sets only
    assert exact == pytest.approx(np.mean([np.mean([float(u[a] == u[b]) for a in range(len(u))
                                                    for b in range(len(u)) if a != b]) for u in units]))
    with pytest.raises(lg.ParameterError, match="positions"):
        lg.percent_agreement(r, weights="linear")


def test_rebuilt_ratings_agree_and_distances_must_match():
    rows = random_sets(3, missing=0.0)
    x = lg.Ratings.from_long(as_table(rows), level="set", distance="masi")
    same = [(i, r, s) for i, r, s in rows]
    twin = lg.Ratings.from_long(as_table(same), level="set", distance="masi")
    assert lg.krippendorff_alpha(twin).value == pytest.approx(lg.krippendorff_alpha(x).value, abs=1e-12)
    jaccard = lg.Ratings.from_long(as_table(rows), level="set", distance="jaccard")
    with pytest.raises(lg.InputError, match="jaccard") as err:
        lg.cross_kappa(x, jaccard)
    assert err.value.code == lg.Reason.INCOMPATIBLE_RATINGS
    nominal = lg.Ratings.from_long({"item_id": [0, 0], "rater_id": [0, 1], "label": ["a", "b"]})
    with pytest.raises(lg.InputError, match="level"):
        lg.cross_kappa(x, nominal)


def test_all_raters_giving_the_same_sets_give_alpha_one():
    rows = [(i, r, frozenset({"a", "b"} if i % 2 else set())) for i in range(10) for r in ("u", "v", "w")]
    r = lg.Ratings.from_long(as_table(rows), level="set", distance="masi")
    assert lg.krippendorff_alpha(r).value == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("distance", ["jaccard", "masi"])
def test_spa_gives_each_pair_the_credit_one_minus_the_distance(distance):
    rows = random_sets(11)
    d = distance_of(distance)
    r = lg.Ratings.from_long(as_table(rows), level="set", distance=distance)
    units = [v for v in by_item(rows).values() if len(v) >= 2]
    agree = [np.mean([1.0 - d(u[a], u[b]) for a in range(len(u)) for b in range(len(u)) if a != b]) for u in units]
    weights = [len(u) - 1 for u in units]
    assert lg.spa(r).value == pytest.approx(np.average(agree, weights=weights), abs=1e-12)
    assert lg.spa(r, "flat").value == pytest.approx(np.mean(agree), abs=1e-12)


@pytest.mark.parametrize("distance", ["jaccard", "masi"])
def test_each_raters_kappa_against_the_trusted_pool_is_kappa_x_of_their_judgements(distance):
    from labelgate.metrics.diagnostics import rater_diagnostics

    crowd_rows, trusted_rows = random_sets(21, n_items=60), random_sets(22, n_items=60)
    crowd = lg.Ratings.from_long(as_table(crowd_rows), level="set", distance=distance)
    trusted = lg.Ratings.from_long(as_table(trusted_rows), level="set", distance=distance)
    rows = rater_diagnostics(crowd, trusted, ci=None)
    assert rows
    for row in rows:
        mine = [r for r in crowd_rows if r[1] == row["rater_id"]]
        if not any(s is not None for *_, s in mine):
            continue
        kappa, _ = cross_kappa_oracle(mine, trusted_rows, distance_of(distance))
        assert row["kappa_vs_trusted"] == pytest.approx(kappa, abs=1e-9)


singleton_designs = st.lists(st.tuples(st.integers(0, 7), st.sampled_from("uvwx"), st.sampled_from("abc")),
                             min_size=2, max_size=40)


@given(rows=singleton_designs, distance=st.sampled_from(["jaccard", "masi"]))
def test_sets_of_one_label_measure_like_the_nominal_labels(rows, distance):
    """Between singletons both set distances are the nominal distance: every coefficient equals the nominal one."""
    rows = list({(item, rater): (item, rater, label) for item, rater, label in rows}.values())
    table = {"item_id": [i for i, _, _ in rows], "rater_id": [r for _, r, _ in rows], "label": [c for *_, c in rows]}
    nominal = lg.Ratings.from_long(table)
    sets = lg.Ratings.from_long({**table, "label": [[c] for c in table["label"]]}, level="set", distance=distance)
    for metric in (lg.krippendorff_alpha, lg.percent_agreement, lg.spa, lg.gwet_ac, lg.fleiss_kappa):
        expected, got = metric(nominal).value, metric(sets).value
        assert (math.isnan(expected) and math.isnan(got)) or got == pytest.approx(expected, abs=1e-12)
    half = len(rows) // 2
    parts = [{k: v[:half] for k, v in table.items()}, {k: v[half:] for k, v in table.items()}]
    try:
        expected = lg.cross_kappa(lg.Ratings.from_long(parts[0]), lg.Ratings.from_long(parts[1])).value
    except (lg.DesignError, lg.InputError):  # no common item, or an empty half
        return
    got = lg.cross_kappa(*(lg.Ratings.from_long({**p, "label": [[c] for c in p["label"]]}, level="set",
                                                distance=distance) for p in parts)).value
    assert (math.isnan(expected) and math.isnan(got)) or got == pytest.approx(expected, abs=1e-12)
