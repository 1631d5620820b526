"""The two-way (pigeonhole) bootstrap of crossed designs: item and rater multiplicities, chunked replicates."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal

import numpy as np

from labelgate.errors import check_option
from labelgate.metrics._intervals import percentile_interval
from labelgate.metrics._resamples import resample_counts
from labelgate.metrics.variance.moments import Arrays

Resample = Literal["items_and_raters", "items"]
RESAMPLE: tuple[Resample, ...] = ("items_and_raters", "items")

# float64 cells per bootstrap chunk (weights and weighted moments)
CHUNK_CELLS = 4_000_000


def check_resample(resample: str, function: str) -> None:
    """Validate the ``resample`` parameter (one of :data:`RESAMPLE`)."""
    check_option(resample, RESAMPLE, "resample", function)


def two_way_draws(n_boot: int, seed: Any, n_items: int, rater_sizes: list[int], resample: str,
                  ) -> Iterator[tuple[np.ndarray, list[np.ndarray | None]]]:
    """Chunks of item multiplicities (b, n_items) and, per rater axis, rater multiplicities.

    The draws are item-block multinomial counts (``resample_counts`` of the
    engine); with ``resample="items"`` the rater weights are None (each rater once).
    """
    rng = np.random.default_rng(seed)
    width = 3 * (n_items + sum(rater_sizes)) + n_items + sum(rater_sizes)
    chunk = max(1, min(n_boot, CHUNK_CELLS // max(width, 1)))
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        w = resample_counts(rng, n_items, size)
        vs: list[np.ndarray | None] = [
            resample_counts(rng, k, size) if resample == "items_and_raters" else None for k in rater_sizes]
        yield w, vs


def bootstrap_replicates(compute: Callable[[np.ndarray, list[np.ndarray | None]], Arrays], n_boot: int,
                         seed: Any, n_items: int, rater_sizes: list[int], resample: str) -> Arrays:
    """Concatenate ``compute(w, vs)`` over the chunks of :func:`two_way_draws`."""
    parts: dict[str, list[np.ndarray]] = {}
    for w, vs in two_way_draws(n_boot, seed, n_items, rater_sizes, resample):
        for key, value in compute(w, vs).items():
            parts.setdefault(key, []).append(np.asarray(value, dtype=np.float64))
    return {k: np.concatenate(v) for k, v in parts.items()}


def interval_of(replicates: np.ndarray, ci: float) -> tuple[tuple[float, float] | None, int]:
    """Percentile interval of the finite replicates and the number of undefined ones."""
    return percentile_interval(np.asarray(replicates, dtype=np.float64), float(ci))
