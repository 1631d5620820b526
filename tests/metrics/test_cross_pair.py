"""kappa_x and normalized kappa_x prepared once for a pair (``cross_pair``), and the panel's pair step.

``cross_pair`` must give exactly the Estimates of :func:`labelgate.cross_kappa` and
:func:`labelgate.normalized_cross_kappa` called apart (point, interval, details), on separately built
replications and on pools of one table, at every level; the panel runs it on the first pool thread to end, which
``run_steps(max_threads=...)`` allows.
"""

from __future__ import annotations

import concurrent.futures
import threading

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
from labelgate.core import parallel
from labelgate.core.parallel import run_steps
from labelgate.errors import DesignError, ParameterError
from labelgate.metrics.cross import cross_pair
from labelgate.metrics.panel import metrics_panel


def _long(seed: int, n_items: int, pool: str, scale: int = 4) -> pd.DataFrame:
    """Sparse ratings: 1-3 raters of 10 per item, some items of one pool only, unused categories possible."""
    rng = np.random.default_rng(seed)
    rows = [(f"item{i}", f"r{k}", int(rng.integers(0, scale)), pool)
            for i in range(n_items) if rng.random() < 0.85
            for k in rng.choice(10, size=int(rng.integers(1, 4)), replace=False)]
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])


def _separate(x, y, **kw):
    return {"cross_kappa": lg.cross_kappa(x, y, **kw).to_dict(),
            "normalized_cross_kappa": lg.normalized_cross_kappa(x, y, **kw).to_dict()}


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
@pytest.mark.parametrize("ci", [None, 0.95])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cross_pair_is_the_two_functions_called_apart(level, ci, seed):
    kw = {"ci": ci, "n_boot": 200, "seed": 11}
    frame_x, frame_y = _long(seed, 60, "crowd"), _long(seed + 100, 60, "trusted")
    x = lg.Ratings.from_long(frame_x, level=level)
    y = lg.Ratings.from_long(frame_y, level=level)
    both = cross_pair(x, y, **kw)
    assert {name: est.to_dict() for name, est in both.items()} == _separate(x, y, **kw)
    pools = lg.ratings_by_pool(pd.concat([frame_x, frame_y]), level=level)
    both = cross_pair(*pools.values(), **kw)
    assert {name: est.to_dict() for name, est in both.items()} == _separate(*pools.values(), **kw)


def test_cross_pair_without_common_items_is_refused_as_cross_kappa_refuses():
    x = lg.Ratings.from_long(pd.DataFrame({"item_id": ["a", "b"], "rater_id": ["r", "r"], "label": [0, 1]}))
    y = lg.Ratings.from_long(pd.DataFrame({"item_id": ["c", "d"], "rater_id": ["r", "r"], "label": [0, 1]}))
    with pytest.raises(DesignError, match="cross_kappa: no item is rated in both") as pair_error:
        cross_pair(x, y)
    with pytest.raises(DesignError) as alone_error:
        lg.cross_kappa(x, y)
    assert str(pair_error.value) == str(alone_error.value)


def test_cross_pair_names_itself_in_a_parameter_error():
    x = lg.Ratings.from_wide([[1, 1], [0, 0]])
    with pytest.raises(ParameterError, match="'ci' parameter of cross_pair"):
        cross_pair(x, x, ci=2.0)


def test_the_panels_pair_is_the_two_functions_called_apart(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_ROWS", 0)  # the pair on a pool thread
    monkeypatch.setenv("LABELGATE_THREADS", "4")
    pools = lg.ratings_by_pool(pd.concat([_long(5, 80, "crowd"), _long(6, 80, "trusted")]))
    panel = metrics_panel(pools, ci=0.9, n_boot=100, seed=2)
    assert list(panel) == ["crowd", "trusted", "crowd vs trusted"]
    pair = {name: est.to_dict() for name, est in panel["crowd vs trusted"].items()}
    assert pair == _separate(pools["crowd"], pools["trusted"], ci=0.9, n_boot=100, seed=2)


def test_run_steps_never_uses_more_threads_than_max_threads(monkeypatch):
    monkeypatch.setenv("LABELGATE_THREADS", "4")
    sizes = []

    class Recording(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers: int, **kw) -> None:
            sizes.append(max_workers)
            super().__init__(max_workers=max_workers, **kw)

    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", Recording)
    pair = threading.Barrier(2, timeout=60)  # each step waits for a second one to run beside it

    def name() -> str:
        pair.wait()
        return threading.current_thread().name

    names = run_steps([name] * 4, rows=parallel.MIN_ROWS, max_threads=2)
    assert len(set(names)) == 2 and all(n.startswith("labelgate") for n in names)
    run_steps([name] * 4, rows=parallel.MIN_ROWS)
    assert sizes == [2, 4]  # four threads allowed: the cap, then no cap
    alone = [threading.current_thread().name] * 3
    assert run_steps([lambda: threading.current_thread().name] * 3, rows=parallel.MIN_ROWS, max_threads=1) == alone
    assert sizes == [2, 4]  # one thread: no pool at all
