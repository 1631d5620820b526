"""The ``gate`` Prefect flow: load → validate → align → measure → decide → publish → persist → alert.

The flow **fails closed**: the decision starts as ERROR and only :func:`labelgate.gate.decide_batch`
can change it; any exception in any step ends the run as ERROR with the step and the reason stored
(when the store is reachable), reported and alerted. An alert delivery failure is recorded on the run
and never changes the decision.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from labelgate import alerts, gate, io
from labelgate.config import GateConfig, config_from_dict, load_config
from labelgate.report import write_gate_report
from labelgate.store import GateRecord, ResultsStore, to_jsonable

T = TypeVar("T")

EXIT_CODES = {"ACCEPT": 0, "REJECT": 1, "REVIEW": 2, "ERROR": 3}


@task(name="load", cache_policy=NO_CACHE)
def load_task(config: GateConfig, batch: str | None, trusted: str | None) -> Any:
    return gate.load(config, batch, trusted)


@task(name="validate", cache_policy=NO_CACHE)
def prepare_task(config: GateConfig, crowd: Any, trusted: Any, out: Path) -> gate.Prepared:
    return gate.prepare(config, crowd, trusted, out)


@task(name="align", cache_policy=NO_CACHE)
def coverage_task(config: GateConfig, crowd: Any, trusted: Any) -> tuple[dict[str, Any], list[str]]:
    return gate.coverage(config, crowd, trusted)


@task(name="measure", cache_policy=NO_CACHE)
def measure_task(config: GateConfig, frame: Any, categories: dict[str, Any], out: Path) -> gate.Measured:
    return gate.measure(config, frame, categories, out)


@task(name="publish", cache_policy=NO_CACHE)
def publish_task(summary: dict[str, Any], out: Path) -> dict[str, str]:
    return write_gate_report(summary, out)


@flow(name="labelgate-gate", log_prints=False, validate_parameters=False)
def gate_flow(config: str | dict[str, Any] | GateConfig, batch: str | None = None, trusted: str | None = None,
              batch_id: str | None = None, force: bool = False) -> dict[str, Any]:
    """Gate one batch against the trusted replication and return the run summary.

    Parameters
    ----------
    config : path, mapping or GateConfig
        The gate configuration (a YAML file path, or an already parsed config).
    batch, trusted : str, optional
        Files of the batch and of the trusted replication; one file with a pool column may hold both
        (then pass it as ``batch``). They override the config's sources.
    batch_id : str, optional
        Name of the batch in the store and the reports (default: the batch file's stem).
    force : bool, default False
        Recompute even when this batch content was gated with this configuration before.

    Returns
    -------
    dict
        ``decision``, ``batch_id``, ``reasons``, ``warnings``, ``coverage``, ``metrics``, ``validation``,
        ``reports``, ``alerts``, ``run_id``, ``reused`` and the hashes.
    """
    logger = get_run_logger()
    started, timing = datetime.now(UTC), {}
    state: dict[str, Any] = {"step": "config", "batch_id": batch_id or _default_batch_id(batch),
                             "batch_hash": None, "config_hash": None, "store": None, "cfg": None}
    try:
        summary, reused = _run(config, batch, trusted, force, state, timing, logger)
    except Exception as exc:  # fail closed: every failure ends as ERROR, never ACCEPT
        logger.error("gate failed in step %r: %s", state["step"], gate.describe_error(exc))
        summary, reused = _error_summary(state, exc, started, timing), False
    if not reused:
        summary["alerts"] = _alert(state, summary, logger)
    summary["reused"] = reused
    logger.info("decision %s for batch %s", summary["decision"], summary["batch_id"])
    return summary


def _run(config: Any, batch: str | None, trusted: str | None, force: bool, state: dict[str, Any],
         timing: dict[str, float], logger: Any) -> tuple[dict[str, Any], bool]:
    started = datetime.now(UTC)
    cfg = _config(config)
    state.update(cfg=cfg, config_hash=cfg.digest(), step="store")
    store = ResultsStore.from_config(cfg.store)
    store.migrate()
    state["store"] = store
    state["step"] = "load"
    crowd, trusted_df = _timed(timing, "load", lambda: load_task(cfg, batch, trusted))
    state["batch_hash"] = batch_hash = io.content_hash(crowd)
    previous = store.find(batch_hash, state["config_hash"])
    if previous is not None and previous.decision != "ERROR" and not force:
        logger.info("batch content already gated with this configuration (run %s): reusing its decision",
                    previous.run_id)
        return _summary(previous), True
    out = gate.run_directory(cfg, state["batch_id"], batch_hash)
    state["step"] = "validate"
    prepared = _timed(timing, "validate", lambda: prepare_task(cfg, crowd, trusted_df, out))
    gate.require_rows(prepared.crowd, "batch")
    gate.require_rows(prepared.trusted, "trusted")
    state["step"] = "align"
    coverage, coverage_problems = _timed(timing, "align", lambda: coverage_task(cfg, prepared.crowd, prepared.trusted))
    state["step"] = "measure"
    frame = gate.canonical_frame(cfg, prepared.crowd, prepared.trusted)
    measured = _timed(timing, "measure", lambda: measure_task(cfg, frame, prepared.categories, out))
    state["step"] = "decide"
    decision = gate.decide_batch(prepared, coverage_problems, measured)
    record = GateRecord(batch_id=state["batch_id"], batch_hash=batch_hash, config_hash=state["config_hash"],
                        decision=decision.decision, reasons=decision.reasons, metrics=measured.metrics,
                        coverage=coverage, validation=prepared.summary, timing=timing, created_at=started,
                        reports={**{f"quarantine_{k}": v for k, v in prepared.quarantine.items()},
                                 "data_docs": measured.data_docs})
    summary = _summary(record, warnings=decision.warnings)
    state["step"] = "publish"
    summary["reports"].update(_timed(timing, "publish", lambda: publish_task(summary, out)))
    _artifacts(summary)
    state["step"] = "persist"
    record.reports, record.timing, record.finished_at = summary["reports"], timing, datetime.now(UTC)
    stored = _timed(timing, "persist", lambda: store.save(record, replace=previous is not None))
    # a concurrent run of the same batch stored its record first: report that one, and do not alert twice
    concurrent = stored.run_id != record.run_id
    return {**_summary(stored, warnings=decision.warnings), "timing": timing}, concurrent


def _config(config: Any) -> GateConfig:
    if isinstance(config, GateConfig):
        return config
    if isinstance(config, dict):
        return config_from_dict(config)
    return load_config(config)


def _timed(timing: dict[str, float], name: str, func: Callable[[], T]) -> T:
    start = time.perf_counter()
    try:
        return func()
    finally:
        timing[name] = round(time.perf_counter() - start, 4)


def _summary(record: GateRecord, warnings: list[str] | None = None) -> dict[str, Any]:
    data = to_jsonable(record.to_dict())
    data["warnings"] = list(warnings or [])
    data["report"] = (data.get("reports") or {}).get("html")
    return data


def _error_summary(state: dict[str, Any], exc: BaseException, started: datetime,
                   timing: dict[str, float]) -> dict[str, Any]:
    record = gate.error_record(state["batch_id"], state["batch_hash"], state["config_hash"], state["step"], exc)
    record.created_at, record.timing, record.finished_at = started, timing, datetime.now(UTC)
    cfg: GateConfig | None = state["cfg"]
    try:
        if cfg is not None:
            out = gate.run_directory(cfg, record.batch_id, record.batch_hash)
            record.reports = write_gate_report(_summary(record), out)
    except Exception as report_error:  # the ERROR decision stands even without a report
        record.reasons.append(f"the error report could not be written: {gate.describe_error(report_error)}")
    try:
        if state["store"] is not None:
            record = state["store"].save(record, replace=True)
    except Exception as store_error:
        record.reasons.append(f"the ERROR record could not be stored: {gate.describe_error(store_error)}")
    summary = _summary(record)
    summary["error_step"] = state["step"]
    return summary


def _alert(state: dict[str, Any], summary: dict[str, Any], logger: Any) -> list[dict[str, Any]]:
    cfg: GateConfig | None = state["cfg"]
    if cfg is None or not cfg.alerts.channels:
        return []
    key = f"{summary.get('batch_hash')}:{summary.get('config_hash')}:{summary['decision']}"
    outcomes = alerts.deliver(summary["decision"], summary, cfg.alerts, dedupe_key=key)
    for outcome in outcomes:
        if not outcome.get("ok"):
            logger.warning("alert to %s failed: %s", outcome.get("channel"), outcome.get("error"))
    try:
        if state["store"] is not None and outcomes:
            state["store"].record_alerts(summary["run_id"], outcomes)
    except Exception as exc:  # the run and its decision are stored already
        logger.warning("could not record alert outcomes: %s", gate.describe_error(exc))
    return outcomes


def _artifacts(summary: dict[str, Any]) -> None:
    """A markdown summary and a metrics table as Prefect artifacts."""
    rows = []
    for question, metrics in (summary.get("metrics") or {}).items():
        for name, m in metrics.items():
            rows.append({"question": question, "metric": name, "value": m.get("value"),
                         "ci_low": m.get("ci_low"), "ci_high": m.get("ci_high"), "verdict": m.get("verdict") or ""})
    lines = [f"# LabelGate: {summary['decision']}", "", f"Batch `{summary['batch_id']}`", "", "## Reasons", ""]
    lines += [f"- {r}" for r in summary.get("reasons") or ["every blocking expectation passes"]]
    lines += ["", "| question | metric | value | interval | verdict |", "|---|---|---|---|---|"]
    lines += [f"| {r['question']} | {r['metric']} | {_fmt(r['value'])} | {_fmt(r['ci_low'])} – {_fmt(r['ci_high'])}"
              f" | {r['verdict']} |" for r in rows]
    if summary.get("report"):
        lines += ["", f"Report: `{summary['report']}`"]
    create_markdown_artifact(key="labelgate-gate", markdown="\n".join(lines), description="LabelGate decision")
    if rows:
        create_table_artifact(key="labelgate-gate-metrics", table=rows, description="LabelGate metrics")


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "—"


def _default_batch_id(batch: str | None) -> str:
    return Path(batch).name.split(".")[0] if batch else "batch"
