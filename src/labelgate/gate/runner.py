"""The gate as one Python call, without Prefect: load → validate → align → measure → diagnose → decide (under the
rater policy: with ``exclude``, the batch without the flagged raters is aligned and measured again) → publish →
persist → alert.

>>> from labelgate.gate import run                                                   # doctest: +SKIP
>>> summary = run("configs/example.yaml", "new_batch.csv", "experts.csv")            # doctest: +SKIP
>>> summary["decision"]                                                               # doctest: +SKIP
'ACCEPT'

The run **fails closed**: the decision starts as ERROR and only :func:`labelgate.gate.steps.decide_batch` can change
it; any exception in any step ends the run as ERROR with the step and the reason stored (when the store is
reachable), reported and alerted. An alert delivery failure is recorded on the run and never changes the decision.

Orchestrators add to a run, never change its logic, through :class:`Hooks`: the Prefect flows
(:mod:`labelgate.flows.gate`) run each step as a Prefect task, write Prefect artifacts and fan questions out on Dask;
the CLI and the flows pass the HTML report writer (reporting is a layer above the gate). ``labelgate gate`` without a
Prefect API runs here with the report writer only: the decision, the record, the report and the alerts are the same
either way, and the record says which way the request ran (:class:`~labelgate.gate.audit.Orchestration`, in the
record's ``validation``; the summary's ``orchestration``).

Every request appends one record to the audit log (:mod:`labelgate.pipeline.store`), keyed by the digest of all its
inputs: a request whose inputs were decided before receives that decision in a record of its own, without
recomputation (``force`` recomputes and appends); a failure appends an ERROR record beside the earlier ones. Concurrent
runs: a run holds the lock of its inputs digest (:mod:`labelgate.pipeline.run_lock`) from the look-up to its record,
so identical inputs gated at once are computed once. Alerts go through the alert ledger under the deciding run's id:
an alert that could not be delivered is sent again by the next request for the batch, and never twice.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from labelgate.gate import alerting, next_steps, raters, steps
from labelgate.gate import diagnose as diagnose_step
from labelgate.gate import measure as measure_step
from labelgate.gate.audit import (
    IN_PROCESS,
    ORCHESTRATION_KEY,
    Orchestration,
    as_config,
    default_batch_id,
    digest_of,
    orchestration_of,
    reused_summary,
)
from labelgate.gate.decision import GateDecision
from labelgate.pipeline import units
from labelgate.pipeline.config import ConfigError, GateConfig
from labelgate.pipeline.run_lock import run_lock
from labelgate.pipeline.sources.folders import inside_roots
from labelgate.pipeline.sources.label_studio import event_project_url
from labelgate.pipeline.store import GateRecord, ResultsStore, record_summary, to_jsonable

T = TypeVar("T")
LOGGER = logging.getLogger("labelgate.gate")


def _direct(name: str, func: Callable[..., T], *args: Any) -> T:
    return func(*args)


@dataclass
class Hooks:
    """What an orchestrator adds around the gate's steps; the defaults run everything here, in turn.

    Attributes
    ----------
    step : callable ``(name, func, *args) -> result``
        Runs one step (``load``, ``validate``, ``align``, ``measure``, ``diagnose``, ``publish``); the Prefect flow
        runs it as a task.
    measure : callable, optional
        Replaces the measure step, and is called as it is, not through ``step`` (the flow's task or its Dask
        fan-out over questions).
    publish : callable ``(summary, out_dir) -> {name: path}``, optional
        Writes the reports (``labelgate.reporting.report.write_gate_report``). Without it a run writes no report
        and its summary names none.
    on_summary : callable ``(summary) -> None``, optional
        Called with the published summary before it is stored (the flow's Prefect artifacts).
    logger : logging.Logger
    orchestration : Orchestration
        How the request runs, for its record (default: in-process, through the Python API).
    """

    step: Callable[..., Any] = _direct
    measure: Callable[..., steps.Measured] | None = None
    publish: Callable[[dict[str, Any], Path], dict[str, str]] | None = None
    on_summary: Callable[[dict[str, Any]], None] | None = None
    logger: Any = field(default=LOGGER)
    orchestration: Orchestration = IN_PROCESS


def run(config: str | Path | Mapping[str, Any] | GateConfig, batch: str | Path | None = None,
        trusted: str | Path | None = None, *, batch_id: str | None = None, force: bool = False,
        hooks: Hooks | None = None, source: Mapping[str, Any] | None = None,
        run_id: str | None = None, roots: list[str] | None = None) -> dict[str, Any]:
    """Gate one batch against the trusted replication and return the run summary.

    Parameters
    ----------
    config : path, mapping or GateConfig
        The gate configuration (a YAML file path, or an already parsed config).
    batch, trusted : str or Path, optional
        Files of the batch and of the trusted replication; one file with a pool column may hold both (then pass
        it as ``batch``). They override the config's sources.
    batch_id : str, optional
        Name of the batch in the store and the reports (default: the batch file's stem).
    force : bool, default False
        Recompute even when these inputs (batch, trusted replication, configuration, LabelGate version) were decided
        before; the new record supersedes the earlier ones of the batch id, which are kept.
    hooks : Hooks, optional
        Orchestration and reports (see :class:`Hooks`).
    source : mapping, optional
        ``{"name": NAME, "params": {...}}``: read the batch from the configuration's named SQL source ``sources.NAME``
        with these values for its ``:name`` placeholders (the form a ``labelgate.batch.ready`` event carries).
    run_id : str, optional
        The id of the record this request writes (default: a new UUID). A caller that must later recognise its own
        record passes it: the served drop folder writes it into its ledger as the claim token of a file before the
        run starts, and after a crash adopts only the record with that id (:mod:`labelgate.gate.watch`).
    roots : list of str, optional
        The folders ``batch`` must resolve inside (symbolic links followed), for a path named by someone other than
        the operator (a ``labelgate.batch.ready`` event, a drop folder). Outside them the run is an ERROR (reason
        ``outside_roots``, step ``load``) and nothing of the file is read. None: no restriction.

    Returns
    -------
    dict
        ``decision`` (ACCEPT / REJECT / REVIEW / ERROR), ``batch_id``, ``reasons``, ``warnings``, ``coverage``,
        ``metrics``, ``validation``, ``raters`` (the flagged raters and the rater policy's outcome, see
        :mod:`labelgate.gate.raters`; None on ERROR), ``reports``, ``report``, ``alerts``, ``run_id``, ``reused`` (and
        ``reused_from``: the run whose decision was served), ``inputs_digest`` and the hashes, ``orchestration``
        (how the request ran, :class:`~labelgate.gate.audit.Orchestration`); ``error_step`` on ERROR. Never raises
        for a failure of the gate itself: that is an ERROR decision.
    """
    hooks = hooks or Hooks()
    started = datetime.now(UTC)
    timing: dict[str, float] = {}
    state = new_state(batch_id, None if batch is None else str(batch), run_id)
    state["orchestration"] = hooks.orchestration
    with ExitStack() as locks:  # the run's key lock is held until its record (even an ERROR one) is stored
        state["locks"] = locks
        try:
            summary = _run(config, batch, trusted, force, state, timing, hooks, source, roots)
        except Exception as exc:  # fail closed: every failure ends as ERROR, never ACCEPT
            hooks.logger.error("gate failed in step %r: %s", state["step"], steps.describe_error(exc))
            summary = error_summary(state, exc, started, timing, hooks.publish)
    summary.setdefault("raters", None)
    summary.setdefault("next_steps", [])
    summary[ORCHESTRATION_KEY] = orchestration_of(summary)
    summary["alerts"] = alerting.alert_run(state["store"], state["cfg"], summary, hooks.logger)
    hooks.logger.info("decision %s for batch %s", summary["decision"], summary["batch_id"])
    return summary


def new_state(batch_id: str | None, batch: str | None, run_id: str | None = None) -> dict[str, Any]:
    """What a run knows so far (its ERROR record is built from this); ``run_id`` default: a new UUID."""
    return {"step": "config", "batch_id": batch_id or default_batch_id(batch), "run_id": run_id or str(uuid.uuid4()),
            "batch_hash": None, "trusted_hash": None, "config_hash": None, "store": None, "cfg": None, "locks": None,
            "orchestration": None}


def _run(config: Any, batch: Any, trusted: Any, force: bool, state: dict[str, Any], timing: dict[str, float],
         hooks: Hooks, source: Mapping[str, Any] | None = None, roots: list[str] | None = None) -> dict[str, Any]:
    started = datetime.now(UTC)
    call = hooks.step
    cfg = as_config(config)
    state.update(cfg=cfg, config_hash=cfg.digest(), step="store")
    store = ResultsStore.from_config(cfg.store)
    store.migrate()
    state["store"] = store
    if source is not None:  # the batch is a named SQL source with the request's parameters (recorded if refused)
        state["step"] = "source"
        cfg = cfg.with_batch_source(dict(source))
        state.update(cfg=cfg, config_hash=cfg.digest())
        batch = None
    state["step"] = "load"
    if roots is not None and batch is not None:  # a path named by an event: read only inside the allowed folders,
        # or a Label Studio project URL on the configured server
        url = event_project_url(cfg.batch, batch)
        batch = url if url is not None else inside_roots(batch, list(roots), "the batch file")
    cfg, crowd, trusted_df, selection = timed(timing, "load",
                                              lambda: call("load", steps.load_inputs, cfg, batch, trusted))
    state.update(cfg=cfg, config_hash=cfg.digest())
    state["batch_hash"], state["trusted_hash"], digest = digest_of(cfg, crowd, trusted_df)
    state["step"] = "lock"
    state["locks"].enter_context(run_lock(store, digest))
    previous = None if force else store.find(digest)
    if previous is not None:
        hooks.logger.info("these inputs were decided by run %s: recording its decision for batch %s",
                          previous.run_id, state["batch_id"])
        reused = with_raters(reused_summary(store, previous, state["batch_id"], selection, state["run_id"], started,
                                            hooks.orchestration))
        return _write_back(cfg, batch, crowd, reused, hooks)
    out = steps.run_directory(cfg, state["batch_id"], state["run_id"])
    if not isinstance(crowd, pd.DataFrame):  # the batch stays in its database (a SQL source with aggregate: true)
        from labelgate.gate import in_database  # the aggregate plan loads only for such a source

        # measured through the orchestrator's measure, but in one piece: the Dask fan-out splits a DataFrame
        direct = replace(hooks, measure=None) if cfg.runner == "dask" else hooks
        prepared, coverage, coverage_problems, measured, diagnosed = in_database.evaluate(
            cfg, crowd, out, call, lambda name, func: timed(timing, name, func), state,
            lambda categories: _measure(cfg, crowd, categories, out, timing, "measure", direct))
    else:
        state["step"] = "validate"
        prepared = timed(timing, "validate",
                         lambda: call("validate", steps.prepare, cfg, crowd, trusted_df, out, selection))
        steps.require_rows(prepared.crowd, "batch")
        steps.require_rows(prepared.trusted, "trusted")
        state["step"] = "align"
        coverage, coverage_problems = timed(
            timing, "align", lambda: call("align", steps.coverage, cfg, prepared.crowd, prepared.trusted))
        state["step"] = "measure"
        frame = steps.canonical_frame(cfg, prepared.crowd, prepared.trusted)
        measured = _measure(cfg, frame, prepared.categories, out, timing, "measure", hooks)
        state["step"] = "diagnose"
        diagnosed = timed(timing, "diagnose",
                          lambda: call("diagnose", diagnose_step.diagnose, cfg, frame, prepared.categories))
    state["step"] = "decide"
    decided = _decide(cfg, prepared, coverage, coverage_problems, measured, diagnosed, out, timing, hooks, state)
    state["step"] = "decide"  # back from the exclusion's own steps: building the record is part of deciding
    decision, measured = decided.decision, decided.measured
    metrics = {q: {**rows, **diagnosed["metrics"].get(q, {})} for q, rows in measured.metrics.items()}
    steps_next = next_steps.next_steps(cfg, decision, measured.outcomes, coverage=decided.coverage,
                                       coverage_problems=decided.problems, rejection=prepared.rejection,
                                       validation=prepared.summary, raters=decided.raters,
                                       diagnostics=diagnosed["diagnostics"])
    # spans and boxes: what was expanded, and the agreement on each label (kept with the decision for its reuse)
    section = to_jsonable(units.report(cfg, selection["units"], frame)) if selection.get("units") else None
    record = GateRecord(batch_id=state["batch_id"], batch_hash=state["batch_hash"], config_hash=state["config_hash"],
                        trusted_hash=state["trusted_hash"], run_id=state["run_id"],
                        decision=decision.decision, reasons=decision.reasons, metrics=metrics,
                        coverage=decided.coverage,
                        validation={**prepared.summary, raters.RECORD_KEY: decided.raters,
                                    next_steps.RECORD_KEY: steps_next,
                                    ORCHESTRATION_KEY: hooks.orchestration.to_dict(),
                                    **({units.RECORD_KEY: units.recorded(section)} if section else {})},
                        timing=timing, created_at=started,
                        reports={**{f"quarantine_{k}": v for k, v in prepared.quarantine.items()},
                                 **decided.reports, "data_docs": measured.data_docs})
    summary = with_raters(record_summary(record, warnings=decision.warnings))
    # per-rater rows go to the report and result.json, not into the store (they grow with the raters)
    summary["diagnostics"] = to_jsonable(diagnosed["diagnostics"])
    if section:
        summary["units"] = section
    state["step"] = "publish"
    if hooks.publish is not None:
        publish = hooks.publish
        summary["reports"].update(timed(timing, "publish", lambda: call("publish", publish, summary, out)))
    summary["report"] = summary["reports"].get("html")
    if hooks.on_summary is not None:
        hooks.on_summary(summary)
    state["step"] = "persist"
    record.reports, record.timing, record.finished_at = summary["reports"], timing, datetime.now(UTC)
    stored = timed(timing, "persist", lambda: store.append(record))
    return _write_back(cfg, batch, crowd, {**with_raters(record_summary(stored, warnings=decision.warnings)),
                                            "timing": timing, "diagnostics": summary["diagnostics"],
                                            **({"units": summary["units"]} if "units" in summary else {})}, hooks)


@dataclass
class _Decided:
    """The batch's decision under the rater policy, and what it was decided on."""

    decision: GateDecision
    coverage: dict[str, Any]
    measured: steps.Measured
    raters: dict[str, Any]
    reports: dict[str, Any]
    problems: list[str] = field(default_factory=list)


def _measure(cfg: GateConfig, frame: Any, categories: dict[str, Any], out: Path, timing: dict[str, float],
             name: str, hooks: Hooks) -> steps.Measured:
    """The measure step, through the orchestrator's own measure when it has one (tasks, a Dask fan-out)."""
    if hooks.measure is not None:
        measure = hooks.measure
        return timed(timing, name, lambda: measure(cfg, frame, categories, out))
    return timed(timing, name, lambda: hooks.step("measure", measure_step.measure, cfg, frame, categories, out))


def _decide(cfg: GateConfig, prepared: steps.Prepared, coverage: dict[str, Any], coverage_problems: list[str],
            measured: steps.Measured, diagnosed: dict[str, Any], out: Path, timing: dict[str, float], hooks: Hooks,
            state: dict[str, Any]) -> _Decided:
    """Decide the batch under the rater policy (:mod:`labelgate.gate.raters`).

    Without an ``exclude`` flag the batch is decided as measured. With one, the excluded raters' rows are written
    next to the report, the rest is aligned and measured again (in its own GX project), and that decision is the
    batch's; the decision on the whole batch is kept in the rater section for the audit.
    """
    whole = steps.decide_batch(prepared, coverage_problems, measured)
    findings = raters.find(cfg, diagnosed["diagnostics"])
    if not findings.excluded:
        return _Decided(raters.decide(whole, findings), coverage, measured, raters.section(findings), {},
                        coverage_problems)
    state["step"] = "exclude"
    kept, dropped = raters.split_rows(cfg, prepared.crowd, findings.excluded)
    path = str(raters.write_excluded(dropped, findings, cfg, out))
    state["step"] = "align"
    kept_coverage, kept_problems = steps.coverage(cfg, kept, prepared.trusted)
    if kept.empty:
        batch, kept_measured = raters.nothing_left(findings, len(dropped)), steps.Measured([], {}, None)
    else:
        state["step"] = "measure"
        frame = steps.canonical_frame(cfg, kept, prepared.trusted)
        kept_measured = _measure(cfg, frame, prepared.categories, out / "without-flagged", timing,
                                 "measure_without_flagged", hooks)
        batch = steps.decide_batch(replace(prepared, crowd=kept), kept_problems, kept_measured)
    section = raters.section(findings, excluded_rows=len(dropped), excluded_file=path, with_flagged=whole,
                             with_flagged_metrics=measured.metrics, with_flagged_coverage=coverage)
    return _Decided(raters.decide(batch, findings, whole, len(dropped)), kept_coverage, kept_measured, section,
                    {"excluded_raters": path, "data_docs_with_flagged": measured.data_docs}, kept_problems)


def with_raters(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with its ``raters`` section (from the record's ``validation``); a reused decision's summary also
    gets the policy's warnings back (the record keeps them in that section)."""
    section = raters.of_summary(summary)
    summary["raters"] = section
    summary["next_steps"] = next_steps.of_summary(summary)
    if section and summary.get("reused") and not summary.get("warnings"):
        summary["warnings"] = list(section.get("warnings") or [])
    return summary


def _write_back(cfg: GateConfig, batch: Any, crowd: Any, summary: dict[str, Any], hooks: Hooks) -> dict[str, Any]:
    """The decision into the Label Studio tasks of the batch, when its source asks for it (after it is recorded)."""
    source = cfg.batch
    if source.format != "label_studio" or not source.write_back:
        return summary
    from labelgate.gate.label_studio import write_back_run  # HTTP to the labelling tool, only for its batches

    tasks = units.source_items(cfg, crowd)  # a span or box question's rows are units of a task: their task
    annotators = crowd.groupby(tasks.to_numpy(), sort=False)[cfg.columns.rater].unique().to_dict()
    outcome = write_back_run(summary, source, batch, tasks.unique(), annotators)
    if "error" in outcome:
        hooks.logger.warning("the decision was not written back to Label Studio: %s", outcome["error"])
    return {**summary, "label_studio": outcome}


def timed(timing: dict[str, float], name: str, func: Callable[[], T]) -> T:
    """``func()``, its wall time recorded as ``timing[name]`` (also when it raises)."""
    start = time.perf_counter()
    try:
        return func()
    finally:
        timing[name] = round(time.perf_counter() - start, 4)


def error_summary(state: dict[str, Any], exc: BaseException, started: datetime, timing: dict[str, float],
                  publish: Callable[[dict[str, Any], Path], dict[str, str]] | None = None) -> dict[str, Any]:
    """Record (when the store is reachable), report and summarise the ERROR of a failed run.

    The ERROR record is appended beside any earlier record of the batch; nothing earlier is touched.
    """
    record = steps.error_record(state["batch_id"], state["batch_hash"], state["config_hash"], state["step"], exc)
    record.run_id, record.trusted_hash = state["run_id"], state["trusted_hash"]
    if state.get("orchestration") is not None:
        record.validation[ORCHESTRATION_KEY] = state["orchestration"].to_dict()
    record.created_at, record.timing, record.finished_at = started, timing, datetime.now(UTC)
    cfg: GateConfig | None = state["cfg"]
    try:
        if cfg is not None and publish is not None:
            out = steps.run_directory(cfg, record.batch_id, record.run_id)
            record.reports = publish(record_summary(record), out)
    except Exception as report_error:  # the ERROR decision stands even without a report
        record.reasons.append(f"the error report could not be written: {steps.describe_error(report_error)}")
    try:
        if state["store"] is not None:
            record = state["store"].append(record)
        else:
            record.reasons.append("the ERROR could not be recorded: the results store was not reached")
    except Exception as store_error:
        record.reasons.append(f"the ERROR record could not be stored: {steps.describe_error(store_error)}")
    summary = record_summary(record)
    summary["error_step"] = state["step"]
    summary[ORCHESTRATION_KEY] = orchestration_of(summary)
    return summary


def failed_batch(cfg: GateConfig, job: Mapping[str, Any], exc: BaseException, step: str,
                 publish: Callable[[dict[str, Any], Path], dict[str, str]] | None = None,
                 orchestration: Orchestration | None = None, run_id: str | None = None) -> dict[str, Any]:
    """The ERROR summary of a batch whose run could not even start (its worker, its transport or the Prefect API
    failed); ``orchestration`` is how the request was to run, ``run_id`` the id of its record (default: new)."""
    state = new_state(job.get("batch_id"), job.get("batch"), run_id)
    state.update(cfg=cfg, config_hash=cfg.digest(), step=step, orchestration=orchestration)
    try:
        state["store"] = ResultsStore.from_config(cfg.store)
    except Exception:  # the ERROR summary is still returned
        state["store"] = None
    return error_summary(state, exc, datetime.now(UTC), {}, publish)


def backlog_job(entry: str | Mapping[str, Any]) -> dict[str, Any]:
    """``{"batch", "trusted", "batch_id"}`` of one backlog entry (a path, or a mapping of those keys)."""
    if isinstance(entry, Mapping):
        unknown = set(entry) - {"batch", "trusted", "batch_id"}
        if unknown:
            raise ConfigError(f"A backlog entry takes 'batch', 'trusted' and 'batch_id'; got {sorted(unknown)}.")
        return {"batch": entry.get("batch"), "trusted": entry.get("trusted"), "batch_id": entry.get("batch_id")}
    return {"batch": str(entry), "trusted": None, "batch_id": None}
