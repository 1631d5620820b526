"""Checks every registered metric must pass (in the manner of scikit-learn's test_common).

The list comes from :data:`labelgate.METRICS`; a public metric missing from it fails
``test_every_public_metric_is_registered``, so a new metric cannot skip these checks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import labelgate as lg
import labelgate.metrics as core
from labelgate.metrics.registry import METRICS, NOT_METRICS, MetricSpec

REGISTRY_NAMES = {"METRICS", "METRICS_BY_NAME", "NOT_METRICS", "MetricSpec"}


def _cases(family: str) -> list:
    return [pytest.param(spec, opts, id=f"{spec.name}-{'-'.join(map(str, opts.values())) or 'default'}")
            for spec in METRICS if spec.family == family for opts in spec.options]


CASES = _cases("agreement")
NUMERIC = _cases("numeric")


def test_every_public_metric_is_registered():
    public = set(core.__all__) - REGISTRY_NAMES - set(NOT_METRICS)
    assert public == {m.name for m in METRICS}
    assert all(getattr(lg, name) is getattr(core, name) for name in public | set(NOT_METRICS))


def _single_value(spec: MetricSpec, result: Any) -> float:
    if spec.kind == "per_category":
        values = [float(e) for e in result.values() if not e.is_nan]
        return float(np.mean(values)) if values else float("nan")
    return float(result)


def _run(spec: MetricSpec, opts: dict[str, Any], wide: Any, level: str = "nominal", categories=None,
         other: Any = None, **kw: Any) -> Any:
    """Evaluate a metric on wide data (and a second replication for cross metrics)."""
    r = lg.Ratings.from_wide(wide, level=level, categories=categories)
    if spec.kind == "cross":
        other = wide if other is None else other
        return spec.func(r, lg.Ratings.from_wide(other, level=level, categories=categories), **opts, **kw)
    return spec.func(r, **opts, **kw)


def _random_wide(rng: np.random.Generator, n_items: int, n_raters: int, q: int, p_missing: float = 0.3):
    """Raters copy a per-item truth with probability 0.7, else guess; columns 0-1 are never missing."""
    truth = rng.integers(0, q, size=(n_items, 1))
    guess = rng.integers(0, q, size=(n_items, n_raters))
    data = np.where(rng.random((n_items, n_raters)) < 0.7, truth, guess).astype(float)
    missing = rng.random(data.shape) < p_missing
    missing[:, :2] = False  # every item pairable
    data[missing] = np.nan
    return data


def _raters(spec: MetricSpec) -> int:
    return 2 if spec.two_raters_only else 4


@pytest.mark.parametrize(("spec", "opts"), CASES)
def test_perfect_agreement_is_one(spec, opts):
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 30)
    wide = np.repeat(truth[:, None], _raters(spec), axis=1).astype(float)
    for level in spec.levels:
        value = _single_value(spec, _run(spec, opts, wide + 1, level=level))
        assert value == pytest.approx(1.0, abs=1e-12), level


@pytest.mark.parametrize(("spec", "opts"), CASES)
def test_shuffling_rows_and_relabelling_ids_changes_nothing(spec, opts):
    rng = np.random.default_rng(1)
    wide = _random_wide(rng, 25, _raters(spec), 3)
    other = _random_wide(rng, 25, _raters(spec), 3) if spec.kind == "cross" else None
    base = _run(spec, opts, wide, other=other)
    items, raters = rng.permutation(wide.shape[0]), rng.permutation(wide.shape[1])
    # rows are item ids and columns rater ids: permuting both relabels items and raters
    moved_other = None if other is None else other[items][:, rng.permutation(other.shape[1])]
    moved = _run(spec, opts, wide[items][:, raters], other=moved_other)
    assert np.isfinite(_single_value(spec, base))
    assert _single_value(spec, moved) == pytest.approx(_single_value(spec, base), abs=1e-12)


@pytest.mark.parametrize(("spec", "opts"), CASES)
def test_category_relabelling_invariance(spec, opts):
    """Nominal: any permutation of the labels; ordered weights / ordinal: reversal of the order."""
    rng = np.random.default_rng(2)
    wide = _random_wide(rng, 30, _raters(spec), 4)
    other = _random_wide(rng, 30, _raters(spec), 4)
    if opts.get("weights") == "ratio":
        # Ratio weights depend on (x_c - x_k)/(x_c + x_k): not on the scale's unit, but on its direction and origin.
        cats = [1.0, 2.0, 3.0, 4.0]
        base = _run(spec, opts, wide + 1, level="ratio", categories=cats, other=other + 1)
        moved = _run(spec, opts, 2.5 * (wide + 1), level="ratio", categories=[2.5 * c for c in cats],
                     other=2.5 * (other + 1))
        assert _single_value(spec, moved) == pytest.approx(_single_value(spec, base), abs=1e-12)
        return
    ordered = opts.get("weights", "identity") != "identity"
    level = "ordinal" if ordered or "ordinal" in spec.levels else "nominal"
    level = level if level in spec.levels else "nominal"
    mapping = np.array([3, 2, 1, 0]) if (ordered or level == "ordinal") else rng.permutation(4)
    relabel = np.vectorize(lambda v: np.nan if np.isnan(v) else float(mapping[int(v)]))
    base = _run(spec, opts, wide, level=level, categories=[0, 1, 2, 3], other=other)
    moved = _run(spec, opts, relabel(wide), level=level, categories=[0, 1, 2, 3], other=relabel(other))
    assert _single_value(spec, moved) == pytest.approx(_single_value(spec, base), abs=1e-12)


@pytest.mark.parametrize(("spec", "opts"), CASES)
def test_single_category_follows_the_degenerate_policy(spec, opts):
    wide = np.ones((6, _raters(spec)))
    result = _run(spec, opts, wide)
    if spec.kind == "per_category":
        assert float(result[1]) == 1.0
        return
    if spec.chance_corrected:
        assert math.isnan(float(result))
        assert result.reason_code in (lg.Reason.NO_EXPECTED_DISAGREEMENT, lg.Reason.NONPOSITIVE_IRR_PRODUCT)
        assert result.reason
    else:
        assert float(result) == 1.0


@pytest.mark.parametrize(("spec", "opts"), CASES)
def test_no_pairable_item_is_nan_with_reason(spec, opts):
    if spec.kind == "cross":
        pytest.skip("cross metrics pair across replications; covered by the no-common-items test")
    wide = np.full((5, _raters(spec)), np.nan)
    for i in range(5):
        wide[i, i % wide.shape[1]] = i % 2
    result = _run(spec, opts, wide, categories=[0, 1])
    estimates = result.values() if spec.kind == "per_category" else [result]
    for est in estimates:
        assert est.is_nan
        assert est.reason_code in (lg.Reason.NO_PAIRABLE_ITEMS, lg.Reason.CATEGORY_NOT_PAIRED)
        assert est.n_items == 0 and est.n_items_excluded == 5


@pytest.mark.parametrize("spec", [s for s in METRICS if s.kind == "cross"], ids=lambda s: s.name)
def test_no_common_items_is_an_error(spec):
    x = lg.Ratings.from_long({"item_id": [1, 1], "rater_id": ["a", "b"], "label": [0, 1]})
    y = lg.Ratings.from_long({"item_id": [2, 2], "rater_id": ["a", "b"], "label": [0, 1]})
    with pytest.raises(lg.DesignError, match="no item is rated in both") as info:
        spec.func(x, y)
    assert info.value.code == lg.Reason.NO_COMMON_ITEMS


@pytest.mark.parametrize(("spec", "opts"), CASES)
def test_interval_is_deterministic_with_seed_and_brackets_the_value(spec, opts):
    rng = np.random.default_rng(3)
    wide = _random_wide(rng, 60, _raters(spec), 3, p_missing=0.2)
    wide[:40, 1] = wide[:40, 0]  # some agreement so values are not degenerate
    for method in spec.ci_methods:
        a = _run(spec, opts, wide, ci=0.9, n_boot=200, seed=11, ci_method=method)
        b = _run(spec, opts, wide, ci=0.9, n_boot=200, seed=11, ci_method=method)
        first = next(iter(a.values())) if spec.kind == "per_category" else a
        second = next(iter(b.values())) if spec.kind == "per_category" else b
        assert first.ci == second.ci
        assert first.ci is not None and first.ci[0] <= first.ci[1]
        assert first.ci_level == 0.9 and first.ci_method == method
        assert first.n_boot == (0 if method == "delta" else 200)  # the delta interval draws no resamples
        low, high = first.ci
        assert low - 0.25 <= float(first) <= high + 0.25  # the interval sits around the estimate


@pytest.mark.parametrize(("spec", "opts"), CASES)
def test_estimate_contract(spec, opts):
    rng = np.random.default_rng(4)
    wide = _random_wide(rng, 20, _raters(spec), 3)
    result = _run(spec, opts, wide)
    estimates = result.values() if spec.kind == "per_category" else [result]
    for est in estimates:
        d = est.to_dict()
        assert {"value", "ci_low", "ci_high", "n_items", "n_ratings", "reason"} <= d.keys()
        assert est.metric == spec.name
        assert est.n_items > 0 and est.n_ratings >= 2 * est.n_items // 2
        assert isinstance(float(est), float)


@pytest.mark.parametrize("spec", [s for s in METRICS if s.family == "agreement"], ids=lambda s: s.name)
@pytest.mark.parametrize(("kw", "parameter"), [({"ci": 1.5}, "ci"), ({"n_boot": 1}, "n_boot"),
                                                ({"ci": "high"}, "ci"), ({"ci_method": "bogus"}, "ci_method")])
def test_bad_bootstrap_parameters_raise_naming_the_parameter(spec, kw, parameter):
    wide = [[0, 1], [1, 1], [0, 0]]
    with pytest.raises(lg.ParameterError, match=f"'{parameter}' parameter of {spec.name}"):
        _run(spec, {}, wide, **kw)


@pytest.mark.parametrize("spec", [s for s in METRICS if any("weights" in o for o in s.options)],
                         ids=lambda s: s.name)
def test_bad_weights_raise_naming_the_parameter(spec):
    with pytest.raises(lg.ParameterError, match=f"'weights' parameter of {spec.name} must be one of"):
        _run(spec, {"weights": "cubic"}, [[0, 1], [1, 1], [0, 0]])


# ------------------------------------------------------------------ numeric family (variance components, Phi)
def _numeric_wide(rng: np.random.Generator, n_items: int = 40, n_raters: int = 5, complete: bool = False):
    """Ratings on a 1..5 scale: a per-item true value, rater noise of one step, missing cells if sparse."""
    truth = rng.integers(1, 6, n_items)[:, None]
    step = rng.integers(-1, 2, (n_items, n_raters)) * (rng.random((n_items, n_raters)) < 0.35)
    data = np.clip(truth + step, 1, 5).astype(float)
    if not complete:
        missing = rng.random(data.shape) < 0.25
        missing[:, :2] = False
        data[missing] = np.nan
    return data


def _run_numeric(spec: MetricSpec, opts: dict, wide, other=None, **kw):
    level = spec.levels[0]
    r = lg.Ratings.from_wide(wide, level=level, categories=[1, 2, 3, 4, 5] if level == "ordinal" else None)
    if spec.kind == "cross":
        other = wide if other is None else other
        return spec.func(r, lg.Ratings.from_wide(other, level=level), **opts, **kw)
    return spec.func(r, **opts, **kw)


@pytest.mark.parametrize(("spec", "opts"), NUMERIC)
def test_numeric_perfect_agreement(spec, opts):
    truth = np.random.default_rng(0).integers(1, 6, 40).astype(float)
    wide = np.repeat(truth[:, None], 4, axis=1)
    assert float(_run_numeric(spec, opts, wide)) == pytest.approx(spec.perfect, abs=1e-9)


@pytest.mark.parametrize(("spec", "opts"), NUMERIC)
def test_numeric_rows_and_ids_order_changes_nothing(spec, opts):
    if not spec.order_invariant:
        pytest.skip(f"{spec.name} draws random split halves of each item's ratings")
    rng = np.random.default_rng(1)
    wide, other = _numeric_wide(rng, complete=spec.complete_only), _numeric_wide(rng, complete=spec.complete_only)
    base = float(_run_numeric(spec, opts, wide, other))
    items, raters = rng.permutation(wide.shape[0]), rng.permutation(wide.shape[1])
    moved = float(_run_numeric(spec, opts, wide[items][:, raters], other[items]))
    assert np.isfinite(base) and moved == pytest.approx(base, abs=1e-9)


@pytest.mark.parametrize(("spec", "opts"), [c for c in CASES if "interval" in c.values[0].levels
                                            and c.values[0].kind != "per_category"])
def test_degeneracy_does_not_depend_on_the_units(spec, opts):
    # docs/degenerate-input.md: "no variation" is decided relative to the data's scale. The pairable values are
    # all equal and the single rating differs, so moment sums centred at it leave a rounding residue once rescaled.
    wide = np.full((4, _raters(spec)), np.nan)  # 3 pairable items: residues at every scale below (tried)
    wide[0, 0], wide[1:, :] = 0.0, 1.0
    base = _run(spec, opts, wide, level="interval")
    moves = ((1.7156, -5.0), (3.3, 0.1), (0.7, 0.3), (2.9, -1.1))
    if opts.get("weights") == "ratio":  # ratio weights need values >= 0 and keep their origin: scalings only
        moves = tuple((scale, 0.0) for scale, _ in moves)
    for scale, shift in moves:
        moved = _run(spec, opts, wide * scale + shift, level="interval")
        if math.isnan(float(base)):
            assert math.isnan(float(moved)) and moved.reason_code == base.reason_code, (scale, shift, moved)
        else:
            assert float(moved) == pytest.approx(float(base), abs=1e-9), (scale, shift)


@pytest.mark.parametrize(("spec", "opts"), NUMERIC)
def test_numeric_affine_invariance(spec, opts):
    if not spec.affine_invariant:
        pytest.skip(f"{spec.name} is defined on a bounded scale")
    rng = np.random.default_rng(2)
    wide, other = _numeric_wide(rng, complete=spec.complete_only), _numeric_wide(rng, complete=spec.complete_only)
    seeded = {"seed": 0} if spec.bootstrap else {}
    base = float(_run_numeric(spec, opts, wide, other, **seeded))
    moved = float(_run_numeric(spec, opts, 2.5 * wide + 7, 2.5 * other + 7, **seeded))
    assert np.isfinite(base) and moved == pytest.approx(base, abs=1e-9)


@pytest.mark.parametrize(("spec", "opts"), NUMERIC)
def test_numeric_constant_ratings_are_nan_with_a_reason(spec, opts):
    result = _run_numeric(spec, opts, np.full((12, 4), 3.0))
    assert result.is_nan and result.reason and result.reason_code is not None


@pytest.mark.parametrize(("spec", "opts"), NUMERIC)
def test_numeric_estimate_contract_and_seeded_interval(spec, opts):
    wide = _numeric_wide(np.random.default_rng(3), n_items=60, complete=spec.complete_only)
    kw = {"ci": 0.9, "n_boot": 200, "seed": 5} if spec.bootstrap else {"ci": 0.9}
    first, second = _run_numeric(spec, opts, wide, **kw), _run_numeric(spec, opts, wide, **kw)
    assert first.metric == spec.name and first.n_items > 0
    assert {"value", "ci_low", "ci_high", "n_items", "reason"} <= first.to_dict().keys()
    assert first.ci is not None and first.ci[0] <= first.ci[1] and first.ci == second.ci


@pytest.mark.parametrize("spec", [s for s in METRICS if s.family == "numeric"], ids=lambda s: s.name)
def test_numeric_bad_interval_parameters_name_the_parameter(spec):
    wide = _numeric_wide(np.random.default_rng(4), complete=spec.complete_only)
    with pytest.raises(lg.ParameterError, match="'ci' parameter"):
        _run_numeric(spec, dict(spec.options[0]), wide, ci=1.5)
    if spec.bootstrap:
        with pytest.raises(lg.ParameterError, match="'n_boot' parameter"):
            _run_numeric(spec, dict(spec.options[0]), wide, n_boot=1)
