"""Slow statistical check: the default 95% intervals cover the population value 93-97% of the time.

Not part of the default suite (``-m "not slow"``); run with ``make test-slow`` or
``pytest -m slow tests/metrics/test_interval_coverage.py``. About 4 minutes on two cores (two worker processes).
The simulation lives in ``benchmarks/coverage.py`` (documented in ``docs/benchmarks.md``);
it is seeded, so a failure is reproducible with ``python benchmarks/coverage.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.slow

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load_coverage() -> ModuleType:
    # Loaded from its path under a private name: "coverage" is also the name of coverage.py.
    if str(BENCHMARKS) not in sys.path:
        sys.path.append(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("labelgate_bench_coverage", BENCHMARKS / "coverage.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


cov = _load_coverage()


def test_closed_form_population_values_match_a_large_sample() -> None:
    # The coverage test is only meaningful if its "truth" is right: on 200,000 items the
    # estimates are within ~0.002 (about 2 standard errors) of the closed forms.
    check = cov.check_population(200_000, seed=7)
    for name, pair in check.items():
        assert pair["large_sample"] == pytest.approx(pair["closed_form"], abs=0.005), name


RUNS, N_BOOT, SEED = 1000, 1000, 0  # MC s.e. of a 95 % coverage: 0.7 percentage points


def test_default_intervals_cover_the_population_value_at_50_100_and_300_items() -> None:
    # ci_method="auto": BCa for every metric but normalized kappa_x, whose delta interval brings its 50-item cell
    # (0.918 with BCa, docs/benchmarks.md "Interval coverage") into the target like the rest.
    tallies = cov.simulate(runs=RUNS, n_items=cov.SIZES, n_boot=N_BOOT, seed=SEED, methods=["auto"], jobs=2)
    text = cov.report(tallies, RUNS, N_BOOT, 0.0)
    low, high = cov.TARGET
    assert {(t.metric, t.items) for t in tallies.values()} == {(m, n) for m in cov.METRICS for n in cov.SIZES}
    assert all(t.is_default and t.runs == RUNS for t in tallies.values()), text
    assert tallies[("normalized_cross_kappa", 50, "delta")].runs == RUNS  # "auto" is delta there
    outside = [(t.metric, t.items) for t in tallies.values() if not low <= t.coverage <= high]
    assert not outside, f"coverage outside {low:.0%}-{high:.0%} for {outside}\n{text}"
    for t in tallies.values():
        # misses do not all fall on one side (a biased estimator or a shifted interval)
        misses = t.below + t.above + t.undefined
        assert max(t.below, t.above) <= 0.7 * misses + 5, f"{t.metric} at {t.items}: lopsided misses\n{text}"
        assert t.undefined == 0 and t.fallback == 0, f"{t.metric} at {t.items}: no interval of its method\n{text}"
