"""The ``gate`` Prefect flows: orchestration around :func:`labelgate.gate.run`, never logic.

Prefect adds: one task per step (load, validate, align, measure, diagnose, publish) so the UI shows where a run
spent its time and where it failed; a markdown and a table artifact per run; the Dask fan-out of questions
(``runner: dask``) and of backlogs. The decision, the store, the lock and the alerts are the gate's own.

Final states (what a Prefect automation can match):

- ERROR → the flow run is **Failed** (message ``LabelGate ERROR: …``); its result is a :class:`GateRunError`
  carrying the summary, so retries and failure automations see a failed gate;
- REJECT → **Completed** with the state name ``Rejected``; REVIEW → **Completed** named ``Review``;
- ACCEPT → **Completed**.

Every decision is also announced as the Prefect event ``labelgate.gate.decided`` (:func:`emit_decided`) when a
Prefect API is configured. :func:`run_gate_flow` runs :func:`gate_flow` and returns the summary whatever the state.
The record of a run says it ran as this flow run (its ``orchestration``: the API and the flow run's id).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed, State

from labelgate.errors import Reason
from labelgate.flows.api import flow_orchestration
from labelgate.flows.markdown import markdown_text
from labelgate.gate import alerting, runner
from labelgate.gate import measure as measure_step
from labelgate.gate import steps as gate
from labelgate.gate.decision import EXIT_CODES as EXIT_CODES
from labelgate.gate.watch import DECIDED_EVENT, batch_resource_id, decided_payload
from labelgate.pipeline.config import ConfigError, GateConfig
from labelgate.pipeline.store import ResultsStore
from labelgate.reporting.report import write_gate_report

T = TypeVar("T")

_STATE_NAMES = {"REJECT": "Rejected", "REVIEW": "Review", "ACCEPT": "Completed"}


class GateRunError(RuntimeError):
    """The result of a gate flow run that ended in ERROR; ``summary`` is the run summary."""

    def __init__(self, summary: dict[str, Any]) -> None:
        reasons = "; ".join(summary.get("reasons") or []) or "unknown failure"
        super().__init__(f"LabelGate ERROR for batch {summary.get('batch_id')}: {reasons}")
        self.summary = summary


def _step(name: str, func: Callable[..., T], *args: Any) -> T:
    """Run one gate step as a Prefect task of that name."""
    return task(name=name, cache_policy=NO_CACHE)(func)(*args)


def _publish(summary: dict[str, Any], out: Path) -> dict[str, str]:
    return write_gate_report(summary, out)


def _hooks() -> runner.Hooks:
    def measure(config: GateConfig, frame: Any, categories: dict[str, Any], out: Path) -> gate.Measured:
        if config.runner == "dask" and len(config.questions) > 1:
            return measure_questions_flow.with_options(task_runner=dask_task_runner(config))(
                config, Unrecorded(frame), categories, out)
        return measure_task(config, frame, categories, out)

    return runner.Hooks(step=_step, measure=measure, publish=_publish, on_summary=_artifacts,
                        logger=get_run_logger(), orchestration=flow_orchestration())


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


@task(name="measure-question", cache_policy=NO_CACHE)
def measure_question_task(config: GateConfig, question: str, frame: Any, categories: dict[str, Any],
                          out: Path) -> gate.Measured:
    """One question's expectations, in its own GX project under ``out`` (questions run in parallel)."""
    only = config.model_copy(update={"questions": [q for q in config.questions if q.name == question]})
    return measure_serially(only, frame, categories, out)


class Unrecorded:
    """A subflow parameter handed over by reference: Prefect records it as ``"<Unrecorded>"``, not its value.

    A subflow's parameters are sent to the Prefect API and stored with its flow run; the judgements of a batch must
    not be (the API refuses parameters over 512 KB, which an expanded span table passes at a few thousand rows, and
    its database is no place for the batch's content). Prefect stores a placeholder for a value its JSON encoder
    cannot read, which this is (no ``__dict__``, not iterable).
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


@flow(name="labelgate-measure-questions", log_prints=False, validate_parameters=False)
def measure_questions_flow(config: GateConfig, frame: Any, categories: dict[str, Any], out: Path) -> gate.Measured:
    """Every question of one batch as its own task on the flow's task runner; outcomes in question order.

    ``frame``: the canonical table, or the same wrapped in :class:`Unrecorded` (as the gate passes it).
    """
    if isinstance(frame, Unrecorded):
        frame = frame.value
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


def final_state(summary: dict[str, Any]) -> State:
    """The flow run's final state for a summary: Failed on ERROR, named Rejected / Review otherwise."""
    decision = summary.get("decision", "ERROR")
    if decision not in _STATE_NAMES:
        return Failed(message=f"LabelGate ERROR: {'; '.join(summary.get('reasons') or [])}"[:500],
                      data=GateRunError(summary))
    return Completed(message=f"LabelGate {decision}", name=_STATE_NAMES[decision], data=summary)


@flow(name="labelgate-gate", log_prints=False, validate_parameters=False)
def gate_flow(config: str | dict[str, Any] | GateConfig, batch: str | None = None, trusted: str | None = None,
              batch_id: str | None = None, force: bool = False, source: dict[str, Any] | None = None,
              roots: list[str] | None = None) -> State:
    """Gate one batch (:func:`labelgate.gate.run` with Prefect tasks and artifacts); see the module for states.

    Returns
    -------
    State
        Failed on ERROR (its result is a :class:`GateRunError` with the summary), Completed otherwise (its result
        is the summary). Use :func:`run_gate_flow` to get the summary in every case.

    ``roots``: the folders ``batch`` must resolve inside (the event deployment sets them: a path named by an event
    outside them is an ERROR and is not read); None for a batch the operator names.
    """
    summary = runner.run(config, batch or None, trusted, batch_id=batch_id, force=force, hooks=_hooks(),
                         source=source or None, roots=roots)  # an event without a path or a source renders them empty
    emit_decided(summary, config)
    return final_state(summary)


def run_gate_flow(config: str | dict[str, Any] | GateConfig, batch: str | None = None, trusted: str | None = None,
                  batch_id: str | None = None, force: bool = False) -> dict[str, Any]:
    """Run :func:`gate_flow` and return the run summary, whatever the final state."""
    state = gate_flow(config, batch=batch, trusted=trusted, batch_id=batch_id, force=force, return_state=True)
    return summary_of_state(state)


def summary_of_state(state: State) -> dict[str, Any]:
    """The run summary held by a gate flow run's final state (an ERROR summary if the flow itself crashed)."""
    result = state.result(raise_on_failure=False)
    if isinstance(result, GateRunError):
        return result.summary
    if isinstance(result, dict):
        return result
    reason = f"the Prefect flow run ended {state.type.value}: {result!r}"[:500]
    return {"decision": "ERROR", "reasons": [reason], "batch_id": None, "metrics": {}, "coverage": {},
            "reports": {}, "report": None, "warnings": [], "alerts": [], "reused": False, "error_step": "flow"}


@task(name="gate-batch", cache_policy=NO_CACHE)
def gate_batch_task(config: str | dict[str, Any] | GateConfig, batch: str | None = None, trusted: str | None = None,
                    batch_id: str | None = None, force: bool = False) -> dict[str, Any]:
    """One batch of a backlog, gated like :func:`gate_flow` (its steps run in this task, in turn)."""
    hooks = runner.Hooks(measure=measure_serially, publish=_publish, on_summary=_artifacts, logger=get_run_logger(),
                         orchestration=flow_orchestration("a batch of a Prefect backlog flow run"))
    summary = runner.run(config, batch, trusted, batch_id=batch_id, force=force, hooks=hooks)
    emit_decided(summary, config)
    return summary


@flow(name="labelgate-gate-backlog", log_prints=False, validate_parameters=False)
def gate_backlog_flow(config: str | dict[str, Any] | GateConfig, batches: Sequence[str | Mapping[str, Any]],
                      force: bool = False) -> list[dict[str, Any]]:
    """Gate a backlog of batches: in turn in this process (``runner: local``) or in parallel on Dask.

    Returns
    -------
    list of dict
        One run summary per batch, in the order given. Each batch fails closed on its own: a failure
        (even of the worker that ran it) is that batch's ERROR, never another batch's.
    """
    jobs = [runner.backlog_job(b) for b in batches]
    try:
        cfg: GateConfig | None = runner.as_config(config)
    except Exception:  # every batch then ends as ERROR with the config error as its reason
        cfg = None
    if cfg is None or cfg.runner != "dask" or len(jobs) < 2:
        return [gate_batch_task(cfg or config, force=force, **job) for job in jobs]
    try:
        task_runner = dask_task_runner(cfg)
    except ConfigError as exc:
        how = flow_orchestration("a batch of a Prefect backlog flow run")
        return [runner.failed_batch(cfg, job, exc, "runner", _publish, how) for job in jobs]
    return _backlog_on_runner.with_options(task_runner=task_runner)(cfg, jobs, force)


@flow(name="labelgate-gate-backlog-fan-out", log_prints=False, validate_parameters=False)
def _backlog_on_runner(cfg: GateConfig, jobs: list[dict[str, Any]], force: bool) -> list[dict[str, Any]]:
    futures = [gate_batch_task.submit(cfg, force=force, **job) for job in jobs]
    summaries = []
    for job, future in zip(jobs, futures, strict=True):
        try:
            summaries.append(future.result())
        except Exception as exc:  # the task itself fails closed; this is the worker or the transport failing
            how = flow_orchestration("a batch of a Prefect backlog flow run")
            summaries.append(runner.failed_batch(cfg, job, exc, "runner", _publish, how))
    return summaries


def emit_decided(summary: dict[str, Any], config: Any = None) -> bool:
    """Deliver ``labelgate.gate.decided`` for a run summary (resource ``labelgate.batch.<id>``, payload
    :func:`labelgate.gate.watch.decided_payload`) when a Prefect API is configured (``PREFECT_API_URL``).

    The event goes through the outbox of the configuration's store (:func:`labelgate.gate.alerting.deliver_event`):
    sent synchronously (:func:`send_decided_event`), and when Prefect does not take it, recorded as owed and sent by
    ``labelgate alerts retry`` once the API is back. Returns whether it was delivered now; a failure is logged and
    never changes the decision. Without a configured API nothing is owed (a local ephemeral API has no listener).
    """
    from prefect.settings import get_current_settings

    if not get_current_settings().api.url:
        return False
    store = None
    try:
        if config is not None:
            store = ResultsStore.from_config(runner.as_config(config).store)
    except Exception as exc:  # the event is still sent, without the outbox
        runner.LOGGER.warning("the events outbox is not reachable (%s): the event is sent without it", exc)
    return bool(alerting.deliver_event(store, summary, send_decided_event, runner.LOGGER))


#: Seconds one delivery of an event may take (connection included) before it is left owed.
EVENT_TIMEOUT_SECONDS = 10.0


def send_decided_event(summary: Mapping[str, Any]) -> None:
    """Send ``labelgate.gate.decided`` for ``summary`` to the configured Prefect API now, and return once it is sent.

    Raises when it was not (the API unreachable, a timeout): unlike ``emit_event``, whose background worker drops
    what it could not send when the process exits, the caller learns the outcome and keeps the event owed.
    """
    from prefect.events import Event, Resource
    from prefect.events.clients import get_events_client

    batch_id = str(summary.get("batch_id") or "batch")
    event = Event(event=DECIDED_EVENT, payload=decided_payload(dict(summary)),
                  resource=Resource({"prefect.resource.id": batch_resource_id(batch_id),
                                     "prefect.resource.name": batch_id,
                                     "labelgate.decision": str(summary.get("decision", "ERROR"))}))

    async def send() -> None:
        async with get_events_client(reconnection_attempts=1) as client:
            await client.emit(event)

    failure: list[BaseException] = []

    def run() -> None:  # its own event loop, in its own thread: callers may be inside a running loop (a flow)
        try:
            asyncio.run(asyncio.wait_for(send(), EVENT_TIMEOUT_SECONDS))
        except BaseException as exc:
            failure.append(exc)

    # the caller's context goes along: Prefect's settings (the API URL, temporary settings) live in context variables,
    # which a new thread does not inherit
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(run,), name="labelgate-decided-event", daemon=True)
    thread.start()
    thread.join(EVENT_TIMEOUT_SECONDS + 5)
    if thread.is_alive():
        raise TimeoutError(f"the event was not sent within {EVENT_TIMEOUT_SECONDS:g} seconds")
    if failure:
        raise failure[0]


def _artifacts(summary: dict[str, Any]) -> None:
    """A markdown summary and a metrics table as Prefect artifacts."""
    rows = _metric_table(summary)
    create_markdown_artifact(key="labelgate-gate", markdown=artifact_markdown(summary, rows),
                             description="LabelGate decision")
    if rows:
        create_table_artifact(key="labelgate-gate-metrics", table=rows, description="LabelGate metrics")


def _metric_table(summary: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for question, metrics in (summary.get("metrics") or {}).items():
        for name, m in metrics.items():
            rows.append({"question": question, "metric": name, "value": m.get("value"),
                         "ci_low": m.get("ci_low"), "ci_high": m.get("ci_high"), "verdict": m.get("verdict") or ""})
    return rows


def artifact_markdown(summary: dict[str, Any], rows: list[dict[str, Any]] | None = None) -> str:
    """The markdown artifact of a run: decision, batch, reasons, what to do next (``next_steps``), the metrics table
    and the report's path.

    Every text that comes from the data or the command line (batch id, question names, reasons, paths) goes through
    :func:`markdown_text`, so the Prefect UI shows it as typed and never renders it.
    """
    rows = _metric_table(summary) if rows is None else rows
    md = markdown_text
    lines = [f"# LabelGate: {md(summary['decision'])}", "", f"Batch: {md(summary['batch_id'])}", "", "## Reasons", ""]
    lines += [f"- {md(r)}" for r in summary.get("reasons") or ["every blocking expectation passes"]]
    if summary.get("next_steps"):
        lines += ["", "## What to do next", ""] + [f"- {md(s)}" for s in summary["next_steps"]]
    lines += ["", "| question | metric | value | interval | verdict |", "|---|---|---|---|---|"]
    lines += [f"| {md(r['question'])} | {md(r['metric'])} | {_fmt(r['value'])} | {_fmt(r['ci_low'])} – "
              f"{_fmt(r['ci_high'])} | {md(r['verdict'])} |" for r in rows]
    if summary.get("report"):
        lines += ["", f"Report: {md(summary['report'])}"]
    return "\n".join(lines)



def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "—"
