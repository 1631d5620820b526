"""The steps of a gate run as plain functions (the Prefect flow in :mod:`labelgate.flows.gate` wraps them).

load → validate (quarantine) → align (coverage) → measure (one GX suite per question on one batch holding
both pools) → decide → record. Nothing here computes a statistic: the GX expectations call the core.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.gate.decision import GateDecision, Outcome, decide, worse
from labelgate.pipeline import sources as io
from labelgate.pipeline import units, validation
from labelgate.pipeline.config import GateConfig, Question
from labelgate.pipeline.sources.pools import load_selected
from labelgate.pipeline.store import GateRecord

if TYPE_CHECKING:
    from labelgate.pipeline.sources.sql_batch import SqlBatch

CANONICAL = {"item": "item_id", "rater": "rater_id", "label": "label", "pool": "pool", "question": "question"}
@dataclass
class Prepared:
    """Validated tables and what validation found."""

    crowd: pd.DataFrame
    trusted: pd.DataFrame
    categories: dict[str, Any]
    summary: dict[str, Any]
    quarantine: dict[str, str]
    rejection: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class Measured:
    """Expectation outcomes and the metrics table of every question."""

    outcomes: list[Outcome]
    metrics: dict[str, dict[str, dict[str, Any]]]
    data_docs: str | None
    skipped: list[str] = field(default_factory=list)


def run_directory(config: GateConfig, batch_id: str, run_id: str) -> Path:
    """``<reports.dir>/<batch id>-<run id>`` (only ``[A-Za-z0-9._-]``): one folder per run, so that runs never share
    a report folder or a GX project, whatever their configurations."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", batch_id)[:80] or "batch"
    return Path(config.reports.dir) / f"{slug}-{re.sub(r'[^A-Za-z0-9._-]+', '_', run_id)}"


# ------------------------------------------------------------------------------------------ steps
def load(config: GateConfig, batch: str | Path | None,
         trusted: str | Path | None) -> tuple[pd.DataFrame | SqlBatch, pd.DataFrame | None, dict[str, Any]]:
    """Crowd (batch) and trusted tables, each within its row selection, and what the selections left out (see
    :func:`labelgate.pipeline.sources.pools.load_selected`); for a SQL batch with ``aggregate: true``, what its
    database said (:func:`labelgate.pipeline.sources.sql_batch.load_sql_batch`) and no table."""
    if in_database(config, batch):
        from labelgate.pipeline.sources.sql_batch import load_sql_batch

        if trusted is not None:
            raise InputError("A trusted file was given, but the batch is gated in its database (batch.aggregate), "
                             "where the query holds both pools; drop the trusted file or 'aggregate'.",
                             Reason.MISSING_SETTING)
        return load_sql_batch(config), None, {}
    return load_selected(config, batch, trusted)


def load_inputs(config: GateConfig, batch: str | Path | None, trusted: str | Path | None
                ) -> tuple[GateConfig, pd.DataFrame | SqlBatch, pd.DataFrame | None, dict[str, Any]]:
    """What decides a request, as both the run and the look-up of a stored decision key it: the configuration as
    the run applies it (a Label Studio question that states no level takes its control's,
    :func:`labelgate.pipeline.sources.label_studio.with_control_levels`) and :func:`load`'s tables and selection."""
    crowd, trusted_df, selection = load(config, batch, trusted)
    if config.batch.format == "label_studio":
        from labelgate.pipeline.sources.label_studio import with_control_levels

        config = with_control_levels(config, crowd)
    if isinstance(crowd, pd.DataFrame) and trusted_df is not None:
        # label sets in one canonical form; spans and boxes one judgement per unit (a position, an object)
        config, crowd, trusted_df, expanded = units.expand(config, crowd, trusted_df)
        if expanded:
            selection["units"] = expanded
    return config, crowd, trusted_df, selection


def in_database(config: GateConfig, batch: str | Path | None) -> bool:
    """Whether the batch is validated and measured in its database (a SQL source with ``aggregate: true``, and no
    file given on the command line)."""
    return config.batch.format == "sql" and config.batch.aggregate and batch is None


def prepare(config: GateConfig, crowd: pd.DataFrame, trusted: pd.DataFrame, out_dir: Path,
            selection: dict[str, Any] | None = None) -> Prepared:
    """Validate both tables, write quarantine files, apply the validation policy.

    ``selection`` (what :func:`load` returns) goes into each table's summary as ``selection``: the rows outside a
    row selection are reported there, not as invalid rows.
    """
    categories = None
    if config.batch.format == "label_studio":  # the questions' categories are the labeling config's, in its order
        from labelgate.pipeline.sources.label_studio import gate_categories

        categories = gate_categories(config, crowd)
    categories = categories if categories is not None else validation.all_categories(config, trusted)
    checked = validation.validate_pools(crowd, trusted, config, categories)
    return prepared(checked, categories, out_dir, selection)


def prepared(checked: tuple[validation.ValidationResult, ...] | list[validation.ValidationResult],
             categories: dict[str, Any], out_dir: Path, selection: dict[str, Any] | None = None) -> Prepared:
    """The crowd and trusted validation results under the policy, their quarantine files written."""
    quarantine: dict[str, str] = {}
    warnings: list[str] = []
    rejection = None
    for result in checked:
        path = validation.write_quarantine(result, out_dir, result.table)
        if path is not None:
            quarantine[result.table] = str(path)
        if not result.passed_policy:
            rejection = f"validation ({result.table}): {result.reason}"
        elif result.n_invalid:
            warnings.append(f"validation ({result.table}): {result.reason}")
    summary = {r.table: r.to_dict() for r in checked}
    for result, role in zip(checked, ("batch", "trusted"), strict=True):
        if selection and role in selection:
            summary[result.table]["selection"] = {"role": role, **selection[role]}
    return Prepared(checked[0].valid, checked[1].valid, categories, summary, quarantine, rejection, warnings)


def coverage(config: GateConfig, crowd: pd.DataFrame, trusted: pd.DataFrame) -> tuple[dict[str, Any], list[str]]:
    """Share of batch items also in the trusted replication, and the problems it raises."""
    item = config.columns.item
    batch_items = pd.Index(crowd[item].dropna().unique())
    trusted_items = pd.Index(trusted[item].dropna().unique())
    common = int(batch_items.isin(trusted_items).sum())
    share = common / len(batch_items) if len(batch_items) else 0.0
    info = {"batch_items": len(batch_items), "trusted_items": len(trusted_items), "common_items": common,
            "coverage": share}
    return info, coverage_problems(config, info)


def coverage_problems(config: GateConfig, info: dict[str, Any]) -> list[str]:
    """The problems the coverage ``info`` (``coverage``, ``common_items``) raises under ``config.coverage``."""
    share, common = info["coverage"], info["common_items"]
    problems = []
    if share < config.coverage.min_coverage:
        problems.append(f"coverage {share:.3f} of batch items are in the trusted replication, below the minimum "
                        f"{config.coverage.min_coverage:.3f}")
    if common < config.coverage.min_common_items:
        problems.append(f"only {common} items are shared with the trusted replication (minimum "
                        f"{config.coverage.min_common_items})")
    return problems


def canonical_frame(config: GateConfig, crowd: pd.DataFrame, trusted: pd.DataFrame) -> pd.DataFrame:
    """Both pools, every question, in the canonical columns ``item_id, rater_id, label, pool, question``."""
    both = io.combined(crowd, trusted, config)
    frames = []
    for question in config.questions:
        frame = io.question_frame(both, config, question)[["item_id", "rater_id", "label", "pool"]].copy()
        frame["label"] = frame["label"].astype(object)
        frame["question"] = question.name
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def decide_batch(prepared: Prepared, coverage_problems: list[str], measured: Measured) -> GateDecision:
    """The batch decision: validation rejection, coverage and expectation outcomes."""
    if prepared.rejection:  # invalid rows reject the batch, unless the measurement found something worse (ERROR)
        base = decide(measured.outcomes, coverage_problems=coverage_problems)
        return GateDecision(worse("REJECT", base.decision), [prepared.rejection, *base.reasons],
                            base.warnings + prepared.warnings)
    result = decide(measured.outcomes, coverage_problems=coverage_problems)
    return GateDecision(result.decision, result.reasons, result.warnings + prepared.warnings + measured.skipped)


def error_record(batch_id: str, batch_hash: str | None, config_hash: str | None, step: str,
                 error: BaseException) -> GateRecord:
    """The ERROR record of a run that failed in ``step`` (the gate fails closed)."""
    # an unhashable run gets a key of its own: two failed runs must never share (and overwrite) a record
    return GateRecord(batch_id=batch_id, batch_hash=batch_hash or f"unhashed:{uuid.uuid4()}",
                      config_hash=config_hash or f"invalid:{uuid.uuid4()}", decision="ERROR",
                      reasons=[f"{step}: {describe_error(error)}"])


def describe_error(error: BaseException) -> str:
    """One line for a failure: the LabelGate message, or the exception type and message."""
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    first = message.strip().splitlines()[0] if message.strip() else type(error).__name__
    return first if getattr(error, "code", None) else f"{type(error).__name__}: {first}"


def _numeric(question: Question, categories: Any) -> bool:
    """Interval/ratio labels, or binary labels (coded 0/1 by the labeler-ICC expectation)."""
    return question.level in ("interval", "ratio") or (question.level != "set" and len(set(categories or ())) == 2)


def ratings_arguments(question: Question, categories: Any) -> dict[str, Any]:
    """The level, distance and categories ``lg.ratings_by_pool`` builds one question's pools with (a set question's
    categories are the elements its sets hold: the core's categories are then the sets observed)."""
    if question.level == "set":
        return {"level": "set", "distance": question.distance}
    return {"level": question.level, "categories": list(categories) if categories is not None else None}


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name) or "question"


def require_rows(frame: pd.DataFrame, what: str) -> None:
    """Stop with an input error when validation left no row to measure."""
    require_valid(len(frame), what)


def require_valid(n_valid: int, what: str) -> None:
    """Stop with an input error when validation left no row of the ``what`` table (its number of valid rows)."""
    if n_valid == 0:
        raise InputError(f"No valid row is left in the {what} table after validation.", Reason.EMPTY_INPUT)
