"""Slow statistical check: 95% item-bootstrap intervals cover the population value 93-97% of the time.

Not part of the default suite (``-m "not slow"``); run with ``make test-slow`` or
``pytest -m slow tests/test_coverage_slow.py``. About 4 minutes on two cores (two worker processes).
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

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


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

# The one cell the default interval misses (docs/benchmarks.md, "Interval coverage"): normalized kappa_x on 50 common
# items covers 0.918 (MC s.e. 0.009), its misses balanced; the percentile interval covers 0.917 there, its misses
# 73 / 10 on one side. It is held at its measured level so that a regression shows; a fix moves it into the target.
KNOWN_SHORT = {("normalized_cross_kappa", 50): 0.90}


def test_default_intervals_cover_the_population_value_at_50_100_and_300_items() -> None:
    tallies = cov.simulate(runs=RUNS, n_items=cov.SIZES, n_boot=N_BOOT, seed=SEED, methods=[cov.DEFAULT_CI_METHOD],
                           jobs=2)
    text = cov.report(tallies, RUNS, N_BOOT, 0.0)
    low, high = cov.TARGET
    outside = [(t.metric, t.items) for t in tallies.values()
               if not low <= t.coverage <= high and (t.metric, t.items) not in KNOWN_SHORT]
    assert not outside, f"coverage outside {low:.0%}-{high:.0%} for {outside}\n{text}"
    for (metric, items), floor in KNOWN_SHORT.items():
        t = tallies[(metric, items, cov.DEFAULT_CI_METHOD)]
        assert floor <= t.coverage <= high, f"{metric} at {items} items: {t.coverage:.3f}\n{text}"
    for t in tallies.values():
        # BCa's point: misses do not all fall on one side (a biased estimator or a shifted interval)
        misses = t.below + t.above + t.undefined
        assert max(t.below, t.above) <= 0.7 * misses + 5, f"{t.metric} at {t.items}: lopsided misses\n{text}"
        assert t.undefined == 0 and t.fallback == 0, f"{t.metric} at {t.items}: no BCa interval\n{text}"
