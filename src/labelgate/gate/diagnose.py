"""The diagnose step: per-rater diagnostics, the design and the disattenuated correlation, for the report."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from labelgate.gate.steps import _numeric, ratings_arguments
from labelgate.pipeline.config import GateConfig

if TYPE_CHECKING:
    from labelgate.core.ratings import Ratings
    from labelgate.sqlagg.raters import RaterEvidence


def diagnose(config: GateConfig, frame: pd.DataFrame | None, categories: dict[str, Any],
             pools: Mapping[str, tuple[Ratings | None, Ratings | None]] | None = None,
             evidence: Mapping[str, RaterEvidence | None] | None = None) -> dict[str, Any]:
    """Per question: per-rater diagnostics, the ratings-per-item design and, for numeric or binary labels,
    the disattenuated correlation of item means (xRR paper eq. 12) — for the report; the raters' flags also reach
    the decision through the rater policy (:mod:`labelgate.gate.raters`). Computed on the whole batch, flagged
    raters included, so the evidence is the same whatever the policy does with them.

    Returns ``{"diagnostics": {question: {"raters": [...], "design": {...}}}, "metrics": {question:
    {"disattenuated_correlation": {value, ci_low, ci_high}}}}``. ``pools`` (question → crowd, trusted ratings)
    replaces ``frame`` for a batch kept in its database; ``evidence`` (question → the crowd raters' sums the
    database aggregated, :class:`~labelgate.sqlagg.raters.RaterEvidence`) then gives the rater rows.
    """
    from labelgate.core.ratings import ratings_by_pool
    from labelgate.metrics.diagnostics import design_summary, rater_diagnostics
    from labelgate.metrics.xcc import disattenuated_correlation

    out: dict[str, Any] = {"diagnostics": {}, "metrics": {}}
    n_boot = config.interval.diagnose_n_boot
    for question in config.questions:
        cats = categories.get(question.name)
        if frame is not None:
            rows = frame[frame["question"] == question.name]
            by_pool = ratings_by_pool(rows, **ratings_arguments(question, cats))
            crowd, trusted = by_pool.get(config.pools.crowd), by_pool.get(config.pools.trusted)
        else:
            crowd, trusted = (pools or {}).get(question.name, (None, None))
        if crowd is None:
            continue
        design = design_summary(crowd, config.pools.crowd)
        if trusted is not None:
            design.update(design_summary(trusted, config.pools.trusted))
        judging = config.raters
        policy: dict[str, Any] = {
            "pool_name": config.pools.crowd, "ci": config.interval.ci, "min_agreement": judging.min_agreement,
            "min_shared_items": judging.min_shared_items, "effect": judging.effect, "fdr": judging.fdr,
            "power": judging.power}
        summed = (evidence or {}).get(question.name)
        raters = summed.rows(**policy) if summed is not None else rater_diagnostics(crowd, trusted, **policy)
        out["diagnostics"][question.name] = {"raters": raters, "design": design}
        if trusted is not None and _numeric(question, cats):
            est = disattenuated_correlation(crowd, trusted, ci=config.interval.ci, n_boot=n_boot,
                                            seed=config.interval.seed)
            out["metrics"][question.name] = {"disattenuated_correlation": {
                "value": est.value, "ci_low": est.ci[0] if est.ci else None,
                "ci_high": est.ci[1] if est.ci else None, "reason": est.reason}}
    return out
