"""The ``gate`` Prefect flow: load → validate → align → measure → decide → publish → persist → alert.

The flow **fails closed**: the decision starts as ERROR and only :func:`labelgate.gate.steps.decide_batch`
can change it; any exception in any step ends the run as ERROR with the step and the reason stored
(when the store is reachable), reported and alerted. An alert delivery failure is recorded on the run
and never changes the decision.

Runners (``runner`` in the config): ``local`` (default) runs everything in this process, one step after
the other. ``dask`` fans the questions of a batch out as Prefect tasks on a ``DaskTaskRunner`` (a subflow),
and :func:`gate_backlog_flow` fans a backlog of batches out the same way; each Dask worker runs one task
at a time (Great Expectations is not thread-safe). See ``docs/deployment.md``.

Concurrent runs: a run holds a lock on its ``(batch_hash, config_hash)`` key from the store look-up to the
stored record (a PostgreSQL session advisory lock, or a file lock next to a SQLite store), so the same batch
gated twice at once is computed once and the second run reuses the first one's record; runs on different
batches do not wait for each other.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from labelgate.errors import Reason
from labelgate.gate import diagnose as diagnose_step
from labelgate.gate import measure as measure_step
from labelgate.gate import steps as gate
from labelgate.pipeline import alerts
from labelgate.pipeline import sources as io
from labelgate.pipeline.config import ConfigError, GateConfig, config_from_dict, load_config
from labelgate.pipeline.store import GateRecord, ResultsStore, to_jsonable
from labelgate.reporting.report import write_gate_report

T = TypeVar("T")

EXIT_CODES = {"ACCEPT": 0, "REJECT": 1, "REVIEW": 2, "ERROR": 3}


@task(name="load", cache_policy=NO_CACHE)
def load_task(config: GateConfig, batch: str | None, trusted: str | None) -> tuple[Any, Any]:
    return gate.load(config, batch, trusted)


@task(name="validate", cache_policy=NO_CACHE)
def prepare_task(config: GateConfig, crowd: Any, trusted: Any, out: Path) -> gate.Prepared:
    return gate.prepare(config, crowd, trusted, out)


@task(name="align", cache_policy=NO_CACHE)
def coverage_task(config: GateConfig, crowd: Any, trusted: Any) -> tuple[dict[str, Any], list[str]]:
    return gate.coverage(config, crowd, trusted)


# Great Expectations' file contexts are not thread-safe (concurrent runs in threads of one process failed in
# its YAML parser, 2 runs out of 4): one measurement at a time per process.
_GX_LOCK = threading.Lock()


def measure_serially(config: GateConfig, frame: Any, categories: dict[str, Any], out: Path) -> gate.Measured:
    """:func:`labelgate.gate.measure.measure` under this process's GX lock."""
    # A plain module function: task bodies that run on Dask workers are pickled by value, and must not
    # reference the lock itself.
    with _GX_LOCK:
        return measure_step.measure(config, frame, categories, out)


@task(name="measure", cache_policy=NO_CACHE)
def measure_task(config: GateConfig, frame: Any, categories: dict[str, Any], out: Path) -> gate.Measured:
    return measure_serially(config, frame, categories, out)


@task(name="diagnose", cache_policy=NO_CACHE)
def diagnose_task(config: GateConfig, frame: Any, categories: dict[str, Any]) -> dict[str, Any]:
    return diagnose_step.diagnose(config, frame, categories)


@task(name="measure-question", cache_policy=NO_CACHE)
def measure_question_task(config: GateConfig, question: str, frame: Any, categories: dict[str, Any],
                          out: Path) -> gate.Measured:
    """One question's expectations, in its own GX project under ``out`` (questions run in parallel)."""
    only = config.model_copy(update={"questions": [q for q in config.questions if q.name == question]})
    return measure_serially(only, frame, categories, out)


@flow(name="labelgate-measure-questions", log_prints=False, validate_parameters=False)
def measure_questions_flow(config: GateConfig, frame: Any, categories: dict[str, Any], out: Path) -> gate.Measured:
    """Every question of one batch as its own task on the flow's task runner; outcomes in question order."""
    futures = []
    for question in config.questions:
        rows = frame[frame["question"] == question.name]
        futures.append(measure_question_task.submit(config, question.name, rows, categories,
                                                    out / "questions" / gate._slug(question.name)))
    return merge_measured([f.result() for f in futures])


def merge_measured(parts: Sequence[gate.Measured]) -> gate.Measured:
    """One :class:`~labelgate.gate.steps.Measured` from per-question ones (Data Docs: the first question's site)."""
    outcomes, metrics, skipped, docs = [], {}, [], None
    for part in parts:
        outcomes.extend(part.outcomes)
        metrics.update(part.metrics)
        skipped.extend(part.skipped)
        docs = docs or part.data_docs
    return gate.Measured(outcomes, metrics, docs, skipped)


def dask_task_runner(config: GateConfig) -> Any:
    """The ``DaskTaskRunner`` of ``runner: dask``: the cluster at ``dask.address``, or a temporary LocalCluster.

    Raises
    ------
    ConfigError
        prefect-dask is not installed (``pip install 'labelgate[dask]'``).
    """
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError as exc:
        raise ConfigError("runner 'dask' needs prefect-dask: pip install 'labelgate[dask]'.",
                          Reason.MISSING_SETTING) from exc
    settings = getattr(config, "dask", None)  # the config's `dask` section (defaults when it has none)
    address = getattr(settings, "address", None)
    if address:
        return DaskTaskRunner(address=address)
    workers = int(getattr(settings, "n_workers", 2))
    # one thread per worker process: GX is not thread-safe, and the numpy work is the process's own
    return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True,
                                          "dashboard_address": None})


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
    return _gate_one(config, batch, trusted, batch_id, force, parallel_questions=True)


@task(name="gate-batch", cache_policy=NO_CACHE)
def gate_batch_task(config: str | dict[str, Any] | GateConfig, batch: str | None = None, trusted: str | None = None,
                    batch_id: str | None = None, force: bool = False) -> dict[str, Any]:
    """One batch of a backlog, gated like :func:`gate_flow` (its steps run in this task, in turn)."""
    return _gate_one(config, batch, trusted, batch_id, force, parallel_questions=False)


@flow(name="labelgate-gate-backlog", log_prints=False, validate_parameters=False)
def gate_backlog_flow(config: str | dict[str, Any] | GateConfig, batches: Sequence[str | Mapping[str, Any]],
                      force: bool = False) -> list[dict[str, Any]]:
    """Gate a backlog of batches: in turn in this process (``runner: local``) or in parallel on Dask.

    Parameters
    ----------
    config : path, mapping or GateConfig
        One configuration for every batch.
    batches : sequence of str or mapping
        A batch file, or ``{"batch": ..., "trusted": ..., "batch_id": ...}`` (as :func:`gate_flow`'s arguments).
    force : bool, default False
        Recompute batches gated before with this configuration.

    Returns
    -------
    list of dict
        One run summary per batch, in the order given. Each batch fails closed on its own: a failure
        (even of the worker that ran it) is that batch's ERROR, never another batch's.
    """
    jobs = [_job(b) for b in batches]
    try:
        cfg: GateConfig | None = _config(config)
    except Exception:  # every batch then ends as ERROR with the config error as its reason
        cfg = None
    if cfg is None or cfg.runner != "dask" or len(jobs) < 2:
        return [gate_batch_task(cfg or config, force=force, **job) for job in jobs]
    try:
        runner = dask_task_runner(cfg)
    except ConfigError as exc:
        return [_failed_batch(cfg, job, exc, "runner") for job in jobs]
    return _backlog_on_runner.with_options(task_runner=runner)(cfg, jobs, force)


@flow(name="labelgate-gate-backlog-fan-out", log_prints=False, validate_parameters=False)
def _backlog_on_runner(cfg: GateConfig, jobs: list[dict[str, Any]], force: bool) -> list[dict[str, Any]]:
    futures = [gate_batch_task.submit(cfg, force=force, **job) for job in jobs]
    summaries = []
    for job, future in zip(jobs, futures, strict=True):
        try:
            summaries.append(future.result())
        except Exception as exc:  # the task itself fails closed; this is the worker or the transport failing
            summaries.append(_failed_batch(cfg, job, exc, "runner"))
    return summaries


def _job(entry: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(entry, Mapping):
        unknown = set(entry) - {"batch", "trusted", "batch_id"}
        if unknown:
            raise ConfigError(f"A backlog entry takes 'batch', 'trusted' and 'batch_id'; got {sorted(unknown)}.")
        return {"batch": entry.get("batch"), "trusted": entry.get("trusted"), "batch_id": entry.get("batch_id")}
    return {"batch": str(entry), "trusted": None, "batch_id": None}


def _failed_batch(cfg: GateConfig, job: dict[str, Any], exc: BaseException, step: str) -> dict[str, Any]:
    state = _new_state(job["batch_id"], job["batch"])
    state.update(cfg=cfg, config_hash=cfg.digest(), step=step)
    try:
        state["store"] = ResultsStore.from_config(cfg.store)
    except Exception:  # the ERROR summary is still returned
        state["store"] = None
    summary = _error_summary(state, exc, datetime.now(UTC), {})
    summary["reused"] = False
    return summary


def _new_state(batch_id: str | None, batch: str | None) -> dict[str, Any]:
    return {"step": "config", "batch_id": batch_id or _default_batch_id(batch), "batch_hash": None,
            "config_hash": None, "store": None, "cfg": None, "locks": None}


def _gate_one(config: Any, batch: str | None, trusted: str | None, batch_id: str | None, force: bool,
              parallel_questions: bool) -> dict[str, Any]:
    logger = get_run_logger()
    started = datetime.now(UTC)
    timing: dict[str, float] = {}
    state = _new_state(batch_id, batch)
    with ExitStack() as locks:  # the run's key lock is held until its record (even an ERROR one) is stored
        state["locks"] = locks
        try:
            summary, reused = _run(config, batch, trusted, force, state, timing, logger, parallel_questions)
        except Exception as exc:  # fail closed: every failure ends as ERROR, never ACCEPT
            logger.error("gate failed in step %r: %s", state["step"], gate.describe_error(exc))
            summary, reused = _error_summary(state, exc, started, timing), False
    if not reused:
        summary["alerts"] = _alert(state, summary, logger)
    summary["reused"] = reused
    logger.info("decision %s for batch %s", summary["decision"], summary["batch_id"])
    return summary


def _run(config: Any, batch: str | None, trusted: str | None, force: bool, state: dict[str, Any],
         timing: dict[str, float], logger: Any, parallel_questions: bool = False) -> tuple[dict[str, Any], bool]:
    started = datetime.now(UTC)
    cfg = _config(config)
    state.update(cfg=cfg, config_hash=cfg.digest(), step="store")
    store = ResultsStore.from_config(cfg.store)
    store.migrate()
    state["store"] = store
    state["step"] = "load"
    crowd, trusted_df = _timed(timing, "load", lambda: load_task(cfg, batch, trusted))
    state["batch_hash"] = batch_hash = io.content_hash(crowd)
    state["step"] = "lock"
    state["locks"].enter_context(run_lock(store, batch_hash, state["config_hash"]))
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
    measured = _timed(timing, "measure", lambda: _measure(cfg, frame, prepared.categories, out, parallel_questions))
    state["step"] = "diagnose"
    diagnosed = _timed(timing, "diagnose", lambda: diagnose_task(cfg, frame, prepared.categories))
    metrics = {q: {**rows, **diagnosed["metrics"].get(q, {})} for q, rows in measured.metrics.items()}
    state["step"] = "decide"
    decision = gate.decide_batch(prepared, coverage_problems, measured)
    record = GateRecord(batch_id=state["batch_id"], batch_hash=batch_hash, config_hash=state["config_hash"],
                        decision=decision.decision, reasons=decision.reasons, metrics=metrics,
                        coverage=coverage, validation=prepared.summary, timing=timing, created_at=started,
                        reports={**{f"quarantine_{k}": v for k, v in prepared.quarantine.items()},
                                 "data_docs": measured.data_docs})
    summary = _summary(record, warnings=decision.warnings)
    # per-rater rows go to the report and result.json, not into the store (they grow with the raters)
    summary["diagnostics"] = to_jsonable(diagnosed["diagnostics"])
    state["step"] = "publish"
    summary["reports"].update(_timed(timing, "publish", lambda: publish_task(summary, out)))
    summary["report"] = summary["reports"].get("html")
    _artifacts(summary)
    state["step"] = "persist"
    record.reports, record.timing, record.finished_at = summary["reports"], timing, datetime.now(UTC)
    stored = _timed(timing, "persist", lambda: store.save(record, replace=previous is not None))
    # a concurrent run of the same batch stored its record first: report that one, and do not alert twice
    concurrent = stored.run_id != record.run_id
    return {**_summary(stored, warnings=decision.warnings), "timing": timing,
            "diagnostics": summary["diagnostics"]}, concurrent


def _measure(cfg: GateConfig, frame: Any, categories: dict[str, Any], out: Path,
             parallel_questions: bool) -> gate.Measured:
    if parallel_questions and cfg.runner == "dask" and len(cfg.questions) > 1:
        return measure_questions_flow.with_options(task_runner=dask_task_runner(cfg))(cfg, frame, categories, out)
    return measure_task(cfg, frame, categories, out)


# Namespace of the two-integer PostgreSQL advisory locks of gate runs ("LG"); the store's own locks use the
# single bigint key space, which does not overlap with this one.
_PG_RUN_LOCK_CLASS = 0x4C47
_SQLITE_LOCK_FILES = 256
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextmanager
def run_lock(store: ResultsStore, batch_hash: str, config_hash: str) -> Iterator[None]:
    """Hold the lock of one ``(batch_hash, config_hash)`` key: concurrent runs of one key queue here.

    PostgreSQL: a session advisory lock on a dedicated connection (released when the block ends or the
    process dies). SQLite file: an exclusive ``flock`` on one of 256 files ``<database>.locks/XX.lock``
    chosen by the key (one machine, as SQLite itself; two keys sharing a file only wait for each other).
    In-memory SQLite: a lock of this process. Other databases: no lock; the store's unique key still keeps
    one record.
    """
    key = hashlib.sha256(f"{batch_hash}\0{config_hash}".encode()).hexdigest()
    backend = store.engine.dialect.name
    if backend == "postgresql":
        with store.engine.connect() as conn:
            objid = int.from_bytes(bytes.fromhex(key[:8]), "big", signed=True)
            conn.exec_driver_sql(f"SELECT pg_advisory_lock({_PG_RUN_LOCK_CLASS}, {objid})")
            conn.commit()
            try:
                yield
            finally:
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({_PG_RUN_LOCK_CLASS}, {objid})")
                conn.commit()
        return
    database = store.engine.url.database or ""
    if backend == "sqlite" and database and database != ":memory:" and not database.startswith("file:"):
        slot = int(key[:8], 16) % _SQLITE_LOCK_FILES  # a bounded set of files: lock files are never deleted
        with _file_lock(Path(database).with_name(Path(database).name + ".locks") / f"{slot:02x}.lock"):
            yield
        return
    if backend == "sqlite":
        with _THREAD_LOCKS_GUARD:
            lock = _THREAD_LOCKS.setdefault(key, threading.Lock())
        with lock:
            yield
        return
    yield


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released when the file is closed, also on a crash
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


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
