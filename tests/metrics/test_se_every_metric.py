"""Every registered metric reports a standard error and names its method (``Estimate.se``, ``se_method``).

The agreement coefficients always have one (analytic, else the delta method's), and so do the ICC forms (Fisher's
analytic variance, else the delta method over the mean squares), Phi (the delta method over the observed
information of its log precision) and the disattenuated correlation (the delta method over its item columns). The other model-based metrics of numeric labels (:data:`BOOTSTRAP_SE`) have the
item bootstrap's: with an interval, of its replicates; without one, of the same replicates drawn when ``se`` is first
read. :func:`test_every_registered_metric_reports_a_standard_error` walks the whole registry, every option of every
metric, without asking for an interval.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import labelgate as lg
from labelgate.core.estimate import SE_METHODS
from labelgate.metrics.registry import METRICS, MetricSpec

#: Metrics whose standard error is the bootstrap's (variance-component shares and the crossed model's correlation:
#: no published variance applies to the estimators as computed).
BOOTSTRAP_SE = {"item_icc", "labeler_icc", "cross_correlation"}


def _wide(spec: MetricSpec, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raters = 2 if spec.two_raters_only else 4
    truth = rng.integers(0, 4, size=(40, 1))
    data = np.where(rng.random((40, raters)) < 0.7, truth, rng.integers(0, 4, size=(40, raters))).astype(float)
    if spec.family == "numeric":
        data = data + rng.normal(scale=0.3, size=data.shape)
    return data


def _run(spec: MetricSpec, opts: dict[str, Any], **kw: Any) -> list[lg.Estimate]:
    level = "nominal" if spec.family == "agreement" and "nominal" in spec.levels else spec.levels[0]
    wide = _wide(spec)
    r = lg.Ratings.from_wide(wide, level=level)
    out = spec.func(r, lg.Ratings.from_wide(_wide(spec, 6), level=level), **opts, **kw) if spec.kind == "cross" \
        else spec.func(r, **opts, **kw)
    return list(out.values()) if spec.kind == "per_category" else [out]


@pytest.mark.parametrize("spec", [s for s in METRICS if s.family == "agreement"], ids=lambda s: s.name)
def test_agreement_metrics_always_report_a_standard_error(spec: MetricSpec) -> None:
    for opts in spec.options:
        for est in _run(spec, opts):
            assert est.se_method in SE_METHODS and math.isfinite(est.se) and est.se >= 0, (spec.name, opts, est)
            d = est.to_dict()
            assert d["se"] == est.se and d["se_method"] == est.se_method
            if est.se_method == "analytic":
                assert est.details["se_source"]


@pytest.mark.parametrize("spec", [s for s in METRICS if s.family == "numeric"], ids=lambda s: s.name)
def test_numeric_metrics_report_the_same_standard_error_with_and_without_an_interval(spec: MetricSpec) -> None:
    opts = spec.options[0]
    kw = {"ci": 0.9, "n_boot": 200, "seed": 2} if spec.bootstrap else {"ci": 0.9}
    (est,) = _run(spec, opts, **kw)
    if spec.name not in BOOTSTRAP_SE:  # a standard error of its own, with or without an interval
        assert est.se_method in ("analytic", "delta") and est.se > 0 and est.details["se_source"]
        # the same seed: the disattenuated correlation's random split halves are drawn from it
        (plain,) = _run(spec, opts, **({"seed": 2} if spec.bootstrap else {}))
        assert plain.se == pytest.approx(est.se, rel=1e-9) and plain.se_method == est.se_method
        return
    assert est.se_method == "bootstrap" and est.se > 0
    # a 90 % percentile interval spans about 2 x 1.645 standard errors
    assert 0.4 < (est.ci[1] - est.ci[0]) / (2 * 1.6448536269514722 * est.se) < 2.5
    # without an interval: the standard deviation of the very replicates the interval was made of
    (plain,) = _run(spec, opts, n_boot=200, seed=2)
    assert plain.ci is None and plain.n_boot == 0
    assert (plain.se, plain.se_method, plain.details["se_n_boot"]) == (est.se, "bootstrap", 200)


@pytest.mark.parametrize("spec", METRICS, ids=lambda s: s.name)
def test_every_registered_metric_reports_a_standard_error(spec: MetricSpec) -> None:
    # every option of every registered metric, on a design where its value is defined, without an interval: a
    # finite standard error and the method that made it
    for opts in spec.options:
        for est in _run(spec, opts):
            assert not est.is_nan, (spec.name, opts, est.reason)
            assert math.isfinite(est.se) and est.se >= 0 and est.se_method in SE_METHODS, (spec.name, opts, est)
            if est.se_method != "bootstrap":
                assert est.details.get("se_source") or est.se_method == "delta", (spec.name, opts)
            if est.se_method == "analytic":
                assert est.details["se_source"], (spec.name, opts)


def test_bootstrap_standard_errors_are_the_numeric_metrics_with_a_bootstrap() -> None:
    # a metric whose standard error is the bootstrap's must be listed here knowingly
    assert BOOTSTRAP_SE <= {s.name for s in METRICS if s.family == "numeric" and s.bootstrap}


def test_specific_agreement_has_the_delta_standard_error_of_each_category() -> None:
    r = lg.Ratings.from_wide([[2, 2, 3, 2], [2, 2, 2, 2], [2, None, 2, 1], [1, 2, 2, 2], [3, 3, 2, 3], [1, 1, 2, 1]],
                             categories=[1, 2, 3])
    plain = lg.specific_agreement(r)
    delta = lg.specific_agreement(r, ci=0.95, ci_method="delta")
    for category, est in plain.items():
        assert est.se_method == "delta" and est.se > 0
        low, high = delta[category].ci
        assert (high - low) / 2 == pytest.approx(1.959963984540054 * est.se, rel=1e-12)


def test_no_standard_error_that_would_fetch_judgements_from_a_cluster() -> None:
    # a Dask-partitioned pool keeps its judgements on the workers until fetch_codes(): the point estimates of
    # Conger's family read only counts, and a standard error must not move every judgement to the driver
    wide = _wide(METRICS[0])
    for metric, kw in ((lg.conger_kappa, {}), (lg.janson_olsson_iota, {"distance": "nominal"})):
        r = lg.Ratings.from_wide(wide)
        r.judgements_in_memory = False  # as PartitionedRatings says before fetch_codes()
        est = metric(r, **kw)
        assert math.isfinite(est.value) and math.isnan(est.se) and est.se_method is None
        assert "fetch_codes()" in est.details["se_note"]
        r.judgements_in_memory = True
        assert math.isfinite(metric(lg.Ratings.from_wide(wide), **kw).se)
