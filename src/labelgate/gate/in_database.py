"""The gate's validate → align → measure → diagnose steps on a batch that stays in its database.

A SQL source with ``aggregate: true`` is loaded as a :class:`~labelgate.pipeline.sources.sql_batch.SqlBatch`: the
database has counted the invalid rows, returned the failing ones (bounded), the coverage and the coded judgements.
Here the same policy as on tables decides the validation (:func:`labelgate.gate.steps.prepared`), the GX suites run
on a GX SQL data source over the valid rows (their providers aggregate in the database), and the rater diagnostics
come from the per-rater sums the database aggregated; only the disattenuated correlation (numeric or binary labels)
fetches a question's coded judgements. The runner decides, records and reports as for any batch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.gate import diagnose as diagnose_step
from labelgate.gate import steps
from labelgate.pipeline import validation
from labelgate.pipeline.config import GateConfig
from labelgate.pipeline.sources.sql_batch import TABLES, SqlBatch

if TYPE_CHECKING:
    from labelgate.core.ratings import Ratings


def evaluate(config: GateConfig, batch: SqlBatch, out: Path, call: Callable[..., Any],
             timed: Callable[[str, Callable[[], Any]], Any], state: dict[str, Any],
             measure: Callable[[dict[str, Any]], steps.Measured],
             ) -> tuple[steps.Prepared, dict[str, Any], list[str], steps.Measured, dict[str, Any]]:
    """``(prepared, coverage, coverage problems, measured, diagnosed)`` of a batch in its database.

    ``call(name, func, *args)`` runs a step (the orchestrator's hook), ``timed(name, func)`` records its time,
    ``measure(categories)`` runs :func:`labelgate.gate.measure.measure` on ``batch`` (timed, through the
    orchestrator), and ``state["step"]`` names the step running (an ERROR names it).
    """
    state["step"] = "validate"
    prepared = timed("validate", lambda: call("validate", prepare, config, batch, out))
    state["step"] = "align"
    coverage = dict(batch.coverage)
    problems = steps.coverage_problems(config, coverage)
    state["step"] = "measure"
    measured = measure(prepared.categories)
    same_as_loaded(batch, measured)
    state["step"] = "diagnose"
    diagnosed = timed("diagnose", lambda: call("diagnose", diagnose_step.diagnose, config, None,
                                               prepared.categories, diagnosed_pools(config, batch, prepared),
                                               batch.raters))
    prepared.summary["sql"].update(batch.report)  # with the judgements the diagnose step fetched, if any
    return prepared, coverage, problems, measured, diagnosed


def same_as_loaded(batch: SqlBatch, measured: steps.Measured) -> None:
    """Every expectation measured the counts the load aggregated: the GX data source reads the table on its own
    connection, so a write between the two reads would be decided under the digest of rows it did not measure.

    Raises
    ------
    InputError
        An expectation's counts (``details.sql.counts``) differ from the loaded pools' (the table changed while the
        batch was gated; gate it again).
    """
    from labelgate.sqlagg.pools import counts_digest

    loaded: dict[tuple[str, str], str | None] = {}
    for outcome in measured.outcomes:
        read = (outcome.details.get("sql") or {}).get("counts") or {}
        for role, pool in zip(("crowd", "trusted"), batch.pools.get(outcome.question, (None, None)), strict=True):
            if read.get(role) is None or pool is None:
                continue
            key = (outcome.question, role)
            if key not in loaded:
                loaded[key] = counts_digest(pool)
            if read[role] != loaded[key]:
                raise InputError(f"The {role} judgements of question {outcome.question!r} changed while the batch was "
                                 f"gated (the {outcome.gate} expectation read other counts than the validation "
                                 "aggregated); gate it again.", Reason.UNREADABLE_INPUT, question=outcome.question)


def diagnosed_pools(config: GateConfig, batch: SqlBatch, prepared: steps.Prepared,
                    ) -> dict[str, tuple[Ratings | None, Ratings | None]]:
    """Per question, the pools the diagnose step reads: the aggregated ones (the design; the rater rows come from
    the database's sums), or — where the disattenuated correlation runs (numeric or binary labels and a trusted
    pool), whose variance components and bootstrap over items and raters need each judgement's rater — the
    judgements fetched (coded, streamed; :meth:`SqlBatch.judgements`)."""
    out = {}
    for question in config.questions:
        crowd, trusted = batch.pools.get(question.name, (None, None))
        if crowd is not None and trusted is not None \
                and steps._numeric(question, prepared.categories.get(question.name)):
            out[question.name] = batch.judgements(config, question)
        else:
            out[question.name] = (crowd, trusted)
    return out


def prepare(config: GateConfig, batch: SqlBatch, out: Path) -> steps.Prepared:
    """The database's validation counts under the policy; the failing rows fetched go to the quarantine files.

    The record's ``validation`` gains ``sql``: what the database path fetched (queries, rows, judgements).
    """
    results = []
    for role in TABLES:
        info = batch.summary[role]
        results.append(validation.ValidationResult(
            valid=pd.DataFrame(), quarantine=batch.quarantine.get(role, pd.DataFrame()), n_rows=info["n_rows"],
            n_invalid=info["n_invalid"], invalid_share=info["invalid_share"], error_counts=info["error_counts"],
            passed_policy=info["passed_policy"], reason=info["reason"], table=info["table"],
            categories=dict(batch.categories), left_out=dict(info.get("left_out") or {})))
    prepared = steps.prepared(results, dict(batch.categories), out)
    for role in TABLES:  # the valid rows stay in the database: their number is the database's
        info = batch.summary[role]
        prepared.summary[info["table"]].update(n_valid=info["n_valid"],
                                               quarantine_rows_written=len(batch.quarantine.get(role, ())))
        steps.require_valid(info["n_valid"], "batch" if role == "crowd" else "trusted")
    prepared.summary["sql"] = dict(batch.report)
    return prepared
