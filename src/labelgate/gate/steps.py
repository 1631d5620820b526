"""The steps of a gate run as plain functions (the Prefect flow in :mod:`labelgate.flows.gate` wraps them).

load → validate (quarantine) → align (coverage) → measure (one GX suite per question on one batch holding
both pools) → decide → record. Nothing here computes a statistic: the GX expectations call the core.
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.gate.decision import GateDecision, Outcome, decide
from labelgate.gx import raised_exception
from labelgate.pipeline import sources as io
from labelgate.pipeline import validation
from labelgate.pipeline.config import Gate, GateConfig, Question
from labelgate.pipeline.store import GateRecord

CANONICAL = {"item": "item_id", "rater": "rater_id", "label": "label", "pool": "pool", "question": "question"}
_GATE_PARAMS = {
    "normalized_cross_kappa": ("min_value", "irr"),
    "cross_kappa": ("min_value",),
    "irr_baseline": ("tolerance", "min_ratio", "max_excess", "irr"),
    "labeler_icc": ("margin",),
    "spa": ("min_value", "max_value", "weighting"),
}
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


def run_directory(config: GateConfig, batch_id: str, batch_hash: str) -> Path:
    """``<reports.dir>/<batch id>-<hash prefix>``: one folder per batch content."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", batch_id)[:80] or "batch"
    return Path(config.reports.dir) / f"{slug}-{batch_hash[:10]}"


# ------------------------------------------------------------------------------------------ steps
def load(config: GateConfig, batch: str | Path | None, trusted: str | Path | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Crowd (batch) and trusted tables (see :func:`labelgate.pipeline.sources.load_pools`)."""
    return io.load_pools(config, batch, trusted)


def prepare(config: GateConfig, crowd: pd.DataFrame, trusted: pd.DataFrame, out_dir: Path) -> Prepared:
    """Validate both tables, write quarantine files, apply the validation policy."""
    categories = validation.all_categories(config, trusted)
    checked = validation.validate_pools(crowd, trusted, config, categories)
    quarantine: dict[str, str] = {}
    warnings: list[str] = []
    rejection = None
    for result in checked:
        path = validation.write_quarantine(result, out_dir, f"quarantine-{result.table}")
        if path is not None:
            quarantine[result.table] = str(path)
        if not result.passed_policy:
            rejection = f"validation ({result.table}): {result.reason}"
        elif result.n_invalid:
            warnings.append(f"validation ({result.table}): {result.reason}")
    summary = {r.table: r.to_dict() for r in checked}
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
    problems = []
    if share < config.coverage.min_coverage:
        problems.append(f"coverage {share:.3f} of batch items are in the trusted replication, below the minimum "
                        f"{config.coverage.min_coverage:.3f}")
    if common < config.coverage.min_common_items:
        problems.append(f"only {common} items are shared with the trusted replication (minimum "
                        f"{config.coverage.min_common_items})")
    return info, problems


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


def applicable_gates(config: GateConfig, question: Question, categories: Any) -> tuple[list[Gate], list[str]]:
    """The question's gates; labeler ICC only where labels are numbers (interval/ratio or binary)."""
    gates, skipped = [], []
    for gate in config.gates_for(question):
        if gate.type == "labeler_icc" and not _numeric(question, categories):
            skipped.append(f"[{question.name}] labeler_icc skipped: it needs numeric labels (interval/ratio or "
                           f"binary), and this question is {question.level} with more than two categories")
            continue
        gates.append(gate)
    return gates, skipped


def suite_config(config: GateConfig, question: Question, gates: list[Gate], categories: Any) -> dict[str, Any]:
    """The GX suite config of one question (input of ``labelgate.gx.suite_from_config``)."""
    defaults = {
        "item_column": CANONICAL["item"], "rater_column": CANONICAL["rater"], "label_column": CANONICAL["label"],
        "pool_column": CANONICAL["pool"], "question_column": CANONICAL["question"], "question": question.name,
        "crowd_pool": config.pools.crowd, "trusted_pool": config.pools.trusted, "level": question.level,
        "categories": list(categories) if categories is not None else None,
        "ci": config.interval.ci, "n_boot": config.interval.n_boot, "seed": config.interval.seed,
        "use_ci_bound": config.interval.use_ci_bound and config.interval.ci is not None,
    }
    entries = []
    for gate in gates:
        params = {k: getattr(gate, k) for k in _GATE_PARAMS[gate.type] if getattr(gate, k) is not None}
        entries.append({"type": gate.type, "severity": "warning" if gate.severity == "warning" else "critical",
                        "meta": {"labelgate_gate": gate.type, "labelgate_severity": gate.severity}, **params})
    return {"name": f"labelgate-{_slug(question.name)}", "defaults": defaults, "expectations": entries}


def measure(config: GateConfig, frame: pd.DataFrame, categories: dict[str, Any], out_dir: Path) -> Measured:
    """Run one GX suite per question in a file context under ``out_dir`` and build Data Docs."""
    import great_expectations as gx
    from great_expectations.checkpoint import UpdateDataDocsAction
    from great_expectations.data_context.types.base import ProgressBarsConfig

    from labelgate.gx import suite_from_config, verify_checkpoint

    context = gx.get_context(mode="file", project_root_dir=str(out_dir))
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_or_update_pandas("labelgate").add_dataframe_asset("judgements")
    batch = asset.add_batch_definition_whole_dataframe("whole")
    definitions, skipped = [], []
    for question in config.questions:
        gates, not_applicable = applicable_gates(config, question, categories.get(question.name))
        skipped.extend(not_applicable)
        if not gates:
            continue
        suite = suite_from_config(suite_config(config, question, gates, categories.get(question.name)))
        suite = context.suites.add_or_update(suite)
        definitions.append(context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=f"vd-{suite.name}", data=batch, suite=suite)))
    if not definitions:
        return Measured([], {}, None, skipped)
    checkpoint = context.checkpoints.add_or_update(gx.Checkpoint(
        name="labelgate-gate", validation_definitions=definitions, result_format={"result_format": "COMPLETE"},
        actions=[UpdateDataDocsAction(name="data_docs")]))
    verify_checkpoint(checkpoint)
    result = checkpoint.run(batch_parameters={"dataframe": frame})
    outcomes: list[Outcome] = []
    metrics: dict[str, dict[str, dict[str, Any]]] = {}
    for run in result.run_results.values():
        for evr in run.results:
            outcome = outcome_from_result(evr)
            outcomes.append(outcome)
            metrics.setdefault(outcome.question, {}).update(_metric_rows(outcome))
    docs = context.get_docs_sites_urls()
    return Measured(outcomes, metrics, docs[0]["site_url"] if docs else None, skipped)


def diagnose(config: GateConfig, frame: pd.DataFrame, categories: dict[str, Any]) -> dict[str, Any]:
    """Per question: per-rater diagnostics, the ratings-per-item design and, for numeric or binary labels,
    the disattenuated correlation of item means (xRR paper eq. 12) — for the report, not the decision.

    Returns ``{"diagnostics": {question: {"raters": [...], "design": {...}}}, "metrics": {question:
    {"disattenuated_correlation": {value, ci_low, ci_high}}}}``.
    """
    from labelgate.core.ratings import ratings_by_pool
    from labelgate.metrics.diagnostics import design_summary, rater_diagnostics
    from labelgate.metrics.xcc import disattenuated_correlation

    out: dict[str, Any] = {"diagnostics": {}, "metrics": {}}
    n_boot = min(config.interval.n_boot, 500)
    for question in config.questions:
        rows = frame[frame["question"] == question.name]
        cats = categories.get(question.name)
        pools = ratings_by_pool(rows, level=question.level, categories=list(cats) if cats is not None else None)
        crowd, trusted = pools.get(config.pools.crowd), pools.get(config.pools.trusted)
        if crowd is None:
            continue
        design = design_summary(crowd, config.pools.crowd)
        if trusted is not None:
            design.update(design_summary(trusted, config.pools.trusted))
        raters = rater_diagnostics(crowd, trusted, pool_name=config.pools.crowd, ci=config.interval.ci,
                                   n_boot=n_boot, seed=config.interval.seed)
        out["diagnostics"][question.name] = {"raters": raters, "design": design}
        if trusted is not None and _numeric(question, cats):
            est = disattenuated_correlation(crowd, trusted, ci=config.interval.ci, n_boot=n_boot,
                                            seed=config.interval.seed)
            out["metrics"][question.name] = {"disattenuated_correlation": {
                "value": est.value, "ci_low": est.ci[0] if est.ci else None,
                "ci_high": est.ci[1] if est.ci else None, "reason": est.reason}}
    return out


def outcome_from_result(evr: Any) -> Outcome:
    """An :class:`Outcome` from a GX ExpectationValidationResult of a LabelGate expectation."""
    cfg = evr.expectation_config
    meta = cfg.meta or {}
    details = dict((evr.result or {}).get("details") or {})
    value = details.get("value")
    value = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    gate = meta.get("labelgate_gate", cfg.type)
    message = raised_exception(evr)
    if message is not None:
        details["reason"] = f"the expectation failed to run: {message}"
        value = math.nan
    thresholds = details.get("thresholds") or {}
    described = ", ".join(f"{k} {v}" for k, v in thresholds.items())
    return Outcome(
        question=str(cfg.kwargs.get("question")), gate=gate, severity=meta.get("labelgate_severity", "blocking"),
        value=value, passes_on_point=bool(details.get("passes_on_point")),
        interval_verdict=details.get("interval_verdict") if details.get("judged_on") == "ci_bound" else None,
        reason=details.get("reason"), description=f"{gate} ({described})" if described else gate,
        details=details)


def _metric_rows(outcome: Outcome) -> dict[str, dict[str, Any]]:
    d = outcome.details
    rows = {outcome.gate: {
        "value": d.get("value"), "ci_low": d.get("ci_low"), "ci_high": d.get("ci_high"),
        "ci_level": d.get("ci_level"), "gate": outcome.gate, "severity": outcome.severity,
        "verdict": outcome.verdict, "thresholds": d.get("thresholds"), "n_items": d.get("n_items"),
        "reason": outcome.reason}}
    components = d.get("components") or {}
    for key, value in components.items():
        # components with an interval are metrics (both IRRs, kappa_x, the IRR difference...);
        # the rest (d_o, d_e, counts) stay in the stored details
        if f"{key}_ci_low" not in components or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        rows.setdefault(key, {"value": value, "ci_low": components.get(f"{key}_ci_low"),
                              "ci_high": components.get(f"{key}_ci_high")})
    return rows


def decide_batch(prepared: Prepared, coverage_problems: list[str], measured: Measured) -> GateDecision:
    """The batch decision: validation rejection, coverage and expectation outcomes."""
    if prepared.rejection:
        base = decide(measured.outcomes, coverage_problems=coverage_problems)
        return GateDecision("REJECT", [prepared.rejection, *base.reasons], base.warnings + prepared.warnings)
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
    return question.level in ("interval", "ratio") or len(set(categories or ())) == 2


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name) or "question"


def require_rows(frame: pd.DataFrame, what: str) -> None:
    """Stop with an input error when validation left no row to measure."""
    if frame.empty:
        raise InputError(f"No valid row is left in the {what} table after validation.", Reason.EMPTY_INPUT)
