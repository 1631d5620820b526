"""A point estimate computes its standard error when it is read, not when the estimate is made.

The standard error reads per-item statistics (the delta method's blocks, the analytic formulas' item terms) that
the point estimate avoids by working from totals; a caller who never reads ``se`` must not pay for them. With an
interval the standard error is computed with it (its blocks, delta standard error or replicates are at hand).
"""

from __future__ import annotations

import math
import pickle
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import labelgate as lg
from labelgate.core.estimate import SE_METHODS, DeferredSE
from labelgate.metrics import _engine


def _ratings(seed: int) -> lg.Ratings:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 4, size=(60, 1))
    wide = np.where(rng.random((60, 4)) < 0.7, truth, rng.integers(0, 4, size=(60, 4))).astype(float)
    wide[rng.random(wide.shape) < 0.15] = np.nan  # unequal ratings per item, some single-rated items
    return lg.Ratings.from_wide(wide)


X, Y = _ratings(1), _ratings(2)
POINTS: dict[str, Callable[..., lg.Estimate]] = {
    "fleiss_kappa": lambda **kw: lg.fleiss_kappa(X, **kw),  # analytic
    "krippendorff_alpha": lambda **kw: lg.krippendorff_alpha(X, **kw),  # analytic
    "spa": lambda **kw: lg.spa(X, **kw),  # delta
    "normalized_cross_kappa": lambda **kw: lg.normalized_cross_kappa(X, Y, **kw),  # delta
}


class Counting:
    """Counts the calls of the engine's standard error and of the linearisation (the per-item blocks)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.se_calls = 0
        self.linearisations = 0
        standard_error, linearized_se = _engine.standard_error, _engine.linearized_se

        def counted_se(*args: Any, **kwargs: Any) -> Any:
            self.se_calls += 1
            return standard_error(*args, **kwargs)

        def counted_linearisation(*args: Any, **kwargs: Any) -> Any:
            self.linearisations += 1
            return linearized_se(*args, **kwargs)

        monkeypatch.setattr(_engine, "standard_error", counted_se)
        monkeypatch.setattr(_engine, "linearized_se", counted_linearisation)


@pytest.mark.parametrize("name", list(POINTS))
def test_a_point_estimate_builds_no_standard_error_until_it_is_read(name: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    count = Counting(monkeypatch)
    est = POINTS[name]()
    assert math.isfinite(est.value) and est.n_items > 0
    assert (count.se_calls, count.linearisations) == (0, 0)
    se = est.se
    assert count.se_calls == 1 and est.se_method in SE_METHODS and math.isfinite(se) and se > 0
    assert count.linearisations == (1 if est.se_method == "delta" else 0)
    # read once: every later read, to_dict and pickling reuse it
    assert (est.se, est.se_method) == (se, est.to_dict()["se_method"]) and est.to_dict()["se"] == se
    pickle.dumps(est)
    assert count.se_calls == 1


@pytest.mark.parametrize("name", list(POINTS))
def test_the_deferred_standard_error_is_the_one_computed_with_an_interval(name: str) -> None:
    # the delta interval computes the linearised standard error; the analytic one is the same formula either way
    point, with_interval = POINTS[name](), POINTS[name](ci=0.9, ci_method="delta")
    assert with_interval.ci is not None and "_se_pending" not in with_interval.__dict__
    assert point.se_method == with_interval.se_method
    assert point.se == pytest.approx(with_interval.se, rel=1e-9)
    assert {k: v for k, v in point.details.items() if k.startswith(("se_", "test_"))} == \
        {k: v for k, v in with_interval.details.items() if k.startswith(("se_", "test_"))}


def test_an_interval_computes_the_standard_error_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    count = Counting(monkeypatch)
    est = lg.spa(X, ci=0.9, ci_method="delta")
    assert count.linearisations == 1 and count.se_calls == 1  # the interval's linearisation, not a second one
    assert "_se_pending" not in est.__dict__ and est.se_method == "delta"


def test_reading_details_equality_and_pickling_compute_the_standard_error() -> None:
    est = lg.fleiss_kappa(X)
    assert "_se_pending" in est.__dict__
    assert "Gwet" in est.details["se_source"] and "_se_pending" not in est.__dict__
    other = lg.fleiss_kappa(X)
    assert other == est and "_se_pending" not in other.__dict__  # equality compares the computed values
    third = lg.fleiss_kappa(X)
    state = pickle.dumps(third)
    assert "_se_pending" not in third.__dict__
    back = pickle.loads(state)
    assert (back.se, back.se_method, back.details["se_source"]) == (est.se, "analytic", est.details["se_source"])


def test_concurrent_readers_compute_it_once() -> None:
    calls, started = [], threading.Event()

    def compute() -> Any:
        calls.append(1)
        started.wait(timeout=30)  # hold the computation until every reader is waiting on it
        return 0.25, "delta", math.nan, math.nan, {"se_note": None}

    est = lg.Estimate("m", 0.5, se=DeferredSE(compute))
    seen: list[float] = []
    threads = [threading.Thread(target=lambda: seen.append(est.se)) for _ in range(4)]
    for t in threads:
        t.start()
    started.set()
    for t in threads:
        t.join(timeout=30)
    assert seen == [0.25] * 4 and len(calls) == 1


def test_a_failing_standard_error_fails_its_reader_and_is_tried_again() -> None:
    attempts: list[int] = []

    def compute() -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise MemoryError("no room for the item blocks")
        return 0.1, "delta", math.nan, math.nan, {}

    est = lg.Estimate("m", 0.5, se=DeferredSE(compute))
    with pytest.raises(MemoryError):
        _ = est.se
    assert est.se == 0.1 and len(attempts) == 2
