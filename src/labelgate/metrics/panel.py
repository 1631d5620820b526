"""A standard panel of core metrics for one replication or a pair of replications."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from labelgate.core.estimate import DEFAULT_N_BOOT, Estimate
from labelgate.core.ratings import Ratings
from labelgate.metrics.agreement import conger_kappa, fleiss_kappa, gwet_ac, percent_agreement
from labelgate.metrics.alpha import krippendorff_alpha
from labelgate.metrics.cross import cross_kappa, normalized_cross_kappa
from labelgate.metrics.spa import spa

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
                  seed: int | None = 0, progress: Progress | None = None) -> dict[str, dict[str, Estimate]]:
    """Per-pool agreement metrics and, for exactly two pools, kappa_x and normalized kappa_x.

    Parameters
    ----------
    pools : mapping of pool name to Ratings
        One or two replications (e.g. from :func:`labelgate.ratings_by_pool`).
    ci, n_boot, seed
        Bootstrap settings passed to every metric.
    progress : callable, optional
        Called with a short label before each metric (for progress display).

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
    out: dict[str, dict[str, Estimate]] = {}
    for name, ratings in pools.items():
        row: dict[str, Estimate] = {}
        for metric, func in SINGLE.items():
            if progress:
                progress(f"{name}: {metric}")
            row[metric] = func(ratings, ci=ci, n_boot=n_boot, seed=seed)
        out[str(name)] = row
    if len(pools) == 2:
        (x_name, x), (y_name, y) = pools.items()
        if progress:
            progress(f"{x_name} vs {y_name}: cross-replication")
        out[f"{x_name} vs {y_name}"] = {
            "cross_kappa": cross_kappa(x, y, ci=ci, n_boot=n_boot, seed=seed),
            "normalized_cross_kappa": normalized_cross_kappa(x, y, ci=ci, n_boot=n_boot, seed=seed),
        }
    return out
