"""The Estimate: its standard-error and test fields keep older constructions, pickles and dictionaries working."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import pickle

import pytest

from labelgate.core.estimate import SE_METHODS, DeferredSE, Estimate


def test_new_fields_default_to_no_standard_error() -> None:
    est = Estimate("fleiss_kappa", 0.5, ci=(0.2, 0.8), ci_level=0.95, n_items=10, n_ratings=30)
    assert math.isnan(est.se) and est.se_method is None
    assert math.isnan(est.z) and math.isnan(est.p_value)
    d = est.to_dict()
    assert d["se"] is None and d["se_method"] is None and d["z"] is None and d["p_value"] is None
    json.dumps(d)  # JSON-friendly: NaN became None


def test_positional_construction_is_unchanged() -> None:
    # the fields before the new ones keep their positions: positional callers still construct the same Estimate
    est = Estimate("m", 0.25, (0.1, 0.4), 0.9, 5, 10, 1, None, None, {"p_o": 0.5}, 100, "bca")
    assert (est.ci, est.ci_level, est.n_items, est.n_ratings, est.n_items_excluded) == ((0.1, 0.4), 0.9, 5, 10, 1)
    assert est.details == {"p_o": 0.5} and est.n_boot == 100 and est.ci_method == "bca"


def test_fields_round_trip_through_pickle_copy_and_replace() -> None:
    est = Estimate("cohen_kappa", 0.4, n_items=20, se=0.1, se_method="analytic", z=3.0, p_value=0.0027)
    for again in (pickle.loads(pickle.dumps(est)), copy.deepcopy(est), dataclasses.replace(est)):
        assert again == est
    d = est.to_dict()
    assert (d["se"], d["se_method"], d["z"], d["p_value"]) == (0.1, "analytic", 3.0, 0.0027)


def test_a_pickle_from_before_the_fields_unpickles_with_defaults() -> None:
    est = Estimate("fleiss_kappa", 0.5, n_items=4)
    reduced = est.__reduce_ex__(2)
    state = dict(reduced[2])
    for name in ("se", "se_method", "z", "p_value", "n_boot", "ci_method"):
        del state[name]  # the state an older version pickled
    old = reduced[0](*reduced[1])
    old.__setstate__(state)
    assert math.isnan(old.se) and old.se_method is None and math.isnan(old.p_value) and old.n_boot == 0
    assert old.value == 0.5 and old.to_dict()["se"] is None


@pytest.mark.parametrize("method", SE_METHODS)
def test_se_methods_are_named(method: str) -> None:
    assert Estimate("m", 0.1, se=0.01, se_method=method).to_dict()["se_method"] == method


def test_a_standard_error_that_adds_no_details_is_not_computed_by_reading_them() -> None:
    calls: list[int] = []

    def compute() -> tuple[float, str, float, float, dict[str, object]]:
        calls.append(1)
        return 0.3, "bootstrap", math.nan, math.nan, {}

    est = Estimate("m", 0.5, details={"part": 1.0}, se=DeferredSE(compute, adds_details=False))  # type: ignore[arg-type]
    assert est.details == {"part": 1.0} and calls == []
    assert (est.se, est.se_method) == (0.3, "bootstrap") and calls == [1]
    back = pickle.loads(pickle.dumps(Estimate("m", 0.5, se=DeferredSE(compute, adds_details=False))))  # type: ignore[arg-type]
    assert back.se == 0.3 and calls == [1, 1]


def test_a_standard_error_that_said_it_adds_no_details_and_adds_some_fails_loudly() -> None:
    est = Estimate("m", 0.5, se=DeferredSE(lambda: (0.3, "delta", math.nan, math.nan, {"se_source": "x"}),  # type: ignore[arg-type]
                                           adds_details=False))
    with pytest.raises(AssertionError, match="se_source"):
        _ = est.se
