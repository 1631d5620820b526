"""The measure step: one Great Expectations suite per question, run on one batch holding both pools.

Nothing here computes a statistic: the GX expectations call the core.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from labelgate.errors import LabelGateError, Reason
from labelgate.gate.decision import Outcome, Reliability
from labelgate.gate.steps import CANONICAL, Measured, _numeric, _slug
from labelgate.pipeline.config import Gate, GateConfig, Question

if TYPE_CHECKING:
    from labelgate.pipeline.sources.sql_batch import SqlBatch

_GATE_PARAMS = {
    "normalized_cross_kappa": ("min_value", "irr", "weights"),
    "cross_kappa": ("min_value",),
    "irr_baseline": ("tolerance", "min_ratio", "max_excess", "irr", "weights"),
    "labeler_icc": ("margin",),
    "spa": ("min_value", "max_value", "weighting"),
}


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
        # a set question's categories are its elements; the core's are the sets observed
        "categories": list(categories) if categories is not None and question.level != "set" else None,
        **({"distance": question.distance} if question.level == "set" else {}),
        "ci": config.interval.ci, "ci_method": config.interval.ci_method, "n_boot": config.interval.n_boot,
        "seed": config.interval.seed,
        "use_ci_bound": config.interval.use_ci_bound and config.interval.ci is not None,
    }
    entries = []
    for gate in gates:
        params = {k: getattr(gate, k) for k in _GATE_PARAMS[gate.type] if getattr(gate, k) is not None}
        entries.append({"type": gate.type, "severity": "warning" if gate.severity == "warning" else "critical",
                        "meta": {"labelgate_gate": gate.type, "labelgate_severity": gate.severity}, **params})
    return {"name": f"labelgate-{_slug(question.name)}", "defaults": defaults, "expectations": entries}


def measure(config: GateConfig, frame: pd.DataFrame | SqlBatch, categories: dict[str, Any], out_dir: Path) -> Measured:
    """Run one GX suite per question in a file context under ``out_dir`` and build Data Docs.

    ``frame``: the judgements (a pandas batch), or a batch kept in its database: then each question's suite runs on
    a GX SQL data source over its valid rows (:meth:`~labelgate.pipeline.sources.sql_batch.SqlBatch.gx_batches`),
    and the LabelGate metric providers compute from the database's aggregates.
    """
    import great_expectations as gx
    from great_expectations.checkpoint import UpdateDataDocsAction
    from great_expectations.data_context.types.base import ProgressBarsConfig

    from labelgate.gx import suite_from_config, verify_checkpoint
    from labelgate.gx.project import project_context, share_static_assets

    context = project_context(out_dir)  # fails closed in any process that opens it (labelgate.gx.project)
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    if isinstance(frame, pd.DataFrame):
        asset = context.data_sources.add_or_update_pandas("labelgate").add_dataframe_asset("judgements")
        whole = asset.add_batch_definition_whole_dataframe("whole")
        batches, parameters = dict.fromkeys((q.name for q in config.questions), whole), {"dataframe": frame}
    else:
        batches, parameters = frame.gx_batches(context), {}
    definitions, skipped = [], []
    for question in config.questions:
        gates, not_applicable = applicable_gates(config, question, categories.get(question.name))
        skipped.extend(not_applicable)
        if not gates:
            continue
        suite = suite_from_config(suite_config(config, question, gates, categories.get(question.name)))
        suite = context.suites.add_or_update(suite)
        definitions.append(context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=f"vd-{suite.name}", data=batches[question.name], suite=suite)))
    if not definitions:
        return Measured([], {}, None, skipped)
    checkpoint = context.checkpoints.add_or_update(gx.Checkpoint(
        name="labelgate-gate", validation_definitions=definitions, result_format={"result_format": "COMPLETE"},
        actions=[UpdateDataDocsAction(name="data_docs")]))
    verify_checkpoint(checkpoint)
    result = checkpoint.run(batch_parameters=parameters)
    outcomes: list[Outcome] = []
    metrics: dict[str, dict[str, dict[str, Any]]] = {}
    faults: list[ExpectationRunError] = []
    for run in result.run_results.values():
        for evr in run.results:
            try:
                outcome = outcome_from_result(evr)
            except ExpectationRunError as fault:  # every fault of the run is named, not only the first
                faults.append(fault)
                continue
            outcomes.append(outcome)
            rows = metrics.setdefault(outcome.question, {})
            rows.update(_metric_rows(outcome))
            if outcome.gate == "irr_baseline":  # its value is the crowd's IRR, which its reasons quote: shown
                # even when no normalized κx reports it (a row of that expectation's, if any, is kept)
                d = outcome.details
                rows.setdefault("irr_crowd", {"value": d.get("value"), "ci_low": d.get("ci_low"),
                                              "ci_high": d.get("ci_high")})
    if faults:
        raise ExpectationRunError.of(faults)
    # GX's static assets are the same for every run: one shared copy beside the run folders, not 4 MB per run
    share_static_assets(context, Path(config.reports.dir) / "gx-static")
    docs = context.get_docs_sites_urls()
    return Measured(outcomes, metrics, docs[0]["site_url"] if docs else None, skipped)


class ExpectationRunError(LabelGateError):
    """An expectation that failed to run (it raised inside the GX run): a fault, so the run is an ERROR.

    A statistic that is undefined on the data (NaN by ``docs/degenerate-input.md``) is computed, and decided by the
    policy (:mod:`labelgate.gate.decision`); an expectation that raised measured nothing, and no decision may rest on
    it. ``context``: ``question``, ``gate`` (the expectation) and ``raised`` (its message as raised).
    """

    default_code = Reason.EXPECTATION_FAILED

    @classmethod
    def of(cls, faults: list[ExpectationRunError]) -> ExpectationRunError:
        """One fault naming every expectation that failed (the first, when there is one)."""
        if len(faults) == 1:
            return faults[0]
        return cls("; ".join(f.message for f in faults), faults=[f.context for f in faults])


def outcome_from_result(evr: Any) -> Outcome:
    """An :class:`Outcome` from a GX ExpectationValidationResult of a LabelGate expectation.

    Raises
    ------
    ExpectationRunError
        The expectation raised inside the GX run (GX reports it in ``exception_info``, read by
        :func:`labelgate.gx.raised_exception`): its message, the question and the expectation are the fault's.
    """
    cfg = evr.expectation_config
    meta = cfg.meta or {}
    details = dict((evr.result or {}).get("details") or {})
    value = _float(details.get("value"), math.nan)
    gate = meta.get("labelgate_gate", cfg.type)
    from labelgate.gx import raised_exception  # GX is imported by the measure step only

    message = raised_exception(evr)
    if message is not None:
        question = str(cfg.kwargs.get("question"))
        raise ExpectationRunError(f"[{question}] the {gate} expectation failed to run: {_one_line(message)}",
                               question=question, gate=gate, raised=message)
    thresholds = details.get("thresholds") or {}
    described = ", ".join(f"{k} {v}" for k, v in thresholds.items())
    checks = details.get("checks") or []
    return Outcome(
        question=str(cfg.kwargs.get("question")), gate=gate, severity=meta.get("labelgate_severity", "blocking"),
        value=value, passes_on_point=bool(details.get("passes_on_point")),
        interval_verdict=details.get("interval_verdict") if details.get("judged_on") == "ci_bound" else None,
        reason=details.get("reason"), description=f"{gate} ({described})" if described else gate,
        details=details, reliability=reliability(gate, details),
        undefined=any(math.isnan(_float(c.get("point"), math.nan)) for c in checks))


def reliability(gate: str, details: dict[str, Any]) -> Reliability | None:
    """Both pools' IRRs on the common items from an expectation's details (None when it reports none)."""
    components = details.get("components") or {}
    if gate == "normalized_cross_kappa":
        crowd, crowd_high = components.get("irr_crowd"), components.get("irr_crowd_ci_high")
    elif gate == "irr_baseline":  # its value is the crowd's IRR
        crowd, crowd_high = details.get("value"), details.get("ci_high")
    else:
        return None
    return Reliability(crowd=_float(crowd, math.nan), trusted=_float(components.get("irr_trusted"), math.nan),
                       crowd_high=_float(crowd_high, math.nan),
                       trusted_low=_float(components.get("irr_trusted_ci_low"), math.nan))


def _one_line(message: str) -> str:
    """A raised message on one line (a record's reason is one line per cause)."""
    return " ".join(message.split()) or "no message"


def _float(value: Any, default: float) -> float:
    """``value`` as a float when it is a finite number, else ``default``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return default
    return float(value)


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
