"""A standard panel of core metrics for one replication or a pair of replications.

The metrics share their work through the caches of `Ratings` and of its item views: the item x category
counts, the per-item agreement (percent agreement, Fleiss, AC1, Conger and SPA), SPA's per-size sums (one
set for all six weightings) and, for two replications, the pair's preparation (κx and normalized κx merge the
categories, match the items and build κx's statistic once: :func:`labelgate.metrics.cross.cross_pair`). On large
tables the pools are measured on threads of their own and the pair on the first of them to end
(:mod:`labelgate.core.parallel`); the numbers do not depend on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from labelgate.core.estimate import DEFAULT_N_BOOT, Estimate
from labelgate.core.parallel import run_steps
from labelgate.core.ratings import Ratings
from labelgate.metrics.agreement import conger_kappa, fleiss_kappa, gwet_ac, percent_agreement
from labelgate.metrics.alpha import krippendorff_alpha
from labelgate.metrics.cross import cross_pair
from labelgate.metrics.spa import Weighting, spa

Progress = Callable[[str], None]

SINGLE: dict[str, Callable[..., Estimate]] = {
    "krippendorff_alpha": krippendorff_alpha,
    "fleiss_kappa": fleiss_kappa,
    "conger_kappa": conger_kappa,
    "gwet_ac": gwet_ac,
    "percent_agreement": percent_agreement,
    "spa": spa,
}


def metrics_panel(pools: Mapping[Any, Ratings], *, ci: float | None = 0.95, n_boot: int = DEFAULT_N_BOOT,
                  seed: int | None = 0, progress: Progress | None = None,
                  spa_weightings: Sequence[Weighting] = ("annotations_m1",)) -> dict[str, dict[str, Estimate]]:
    """Per-pool agreement metrics and, for exactly two pools, kappa_x and normalized kappa_x.

    Parameters
    ----------
    pools : mapping of pool name to Ratings
        One or two replications (e.g. from :func:`labelgate.ratings_by_pool`).
    ci, n_boot, seed
        Bootstrap settings passed to every metric.
    progress : callable, optional
        Called with a short label before each metric (for progress display); on large tables the pools are
        measured on threads, so it may be called from several threads, the pools' labels interleaved.
    spa_weightings : sequence of SPA weightings, default ("annotations_m1",)
        The SPA weightings to report (:data:`labelgate.metrics.spa.WEIGHTINGS` for all six); the first is
        reported as ``"spa"``, the others as ``"spa_<weighting>"``.

    Returns
    -------
    dict
        ``{pool name: {metric: Estimate}}``, plus ``"<x> vs <y>": {"cross_kappa", "normalized_cross_kappa"}``
        for two pools.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0], [1, 1]])
    >>> panel = metrics_panel({"all": r}, ci=None)
    >>> round(float(panel["all"]["fleiss_kappa"]), 4)
    0.4667
    """
    def pool_row(name: Any, ratings: Ratings) -> dict[str, Estimate]:
        row: dict[str, Estimate] = {}
        for metric, func in SINGLE.items():
            if progress:
                progress(f"{name}: {metric}")
            if metric != "spa":
                row[metric] = func(ratings, ci=ci, n_boot=n_boot, seed=seed)
                continue
            for position, weighting in enumerate(spa_weightings):
                key = "spa" if position == 0 else f"spa_{weighting}"
                row[key] = spa(ratings, weighting, ci=ci, n_boot=n_boot, seed=seed)
        return row

    steps: list[Callable[[], dict[str, Estimate]]] = [partial(pool_row, name, r) for name, r in pools.items()]
    names = [str(name) for name in pools]
    if len(pools) == 2:
        (x_name, x), (y_name, y) = pools.items()

        def cross_row() -> dict[str, Estimate]:
            if progress:
                progress(f"{x_name} vs {y_name}: cross-replication")
            return cross_pair(x, y, ci=ci, n_boot=n_boot, seed=seed)

        steps.append(cross_row)
        names.append(f"{x_name} vs {y_name}")
    # on large tables the steps run on threads (labelgate.core.parallel), one per pool: the pair's step starts on
    # the thread of the pool that ends first (the pair reuses the pools' count tables, made by then) instead of
    # after both
    rows = run_steps(steps, sum(ratings.n_ratings for ratings in pools.values()), max_threads=len(pools))
    return dict(zip(names, rows, strict=True))
