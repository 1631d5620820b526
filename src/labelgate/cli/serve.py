"""``labelgate serve`` (one warm process that gates batches as they arrive) and ``labelgate submit`` (hand one batch
to a running server and wait for its decision).

The main application adds them with ``register(app)``. ``serve`` watches a drop folder
(:class:`labelgate.gate.watch.DropFolder`) and, when a Prefect API is configured (``PREFECT_API_URL``), serves the
gate deployment triggered by ``labelgate.batch.ready`` (:mod:`labelgate.flows.serve`) and emits
``labelgate.gate.decided`` for every decision. It logs one line per batch queued, running and decided. The first
SIGTERM or Ctrl-C finishes the running batch and stops; a second one abandons it (the next start gates it again).
``label-studio-webhook`` receives Label Studio's webhooks and emits ``labelgate.batch.ready`` for the served gate
(:mod:`labelgate.cli.label_studio`, docs/label-studio.md).
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from labelgate.cli._output import fail, safe
from labelgate.cli.label_studio import DEFAULT_SECRET_ENV, webhook_receiver
from labelgate.gate.decision import EXIT_CODES
from labelgate.pipeline.limits import OneLineFormatter


def register(app: typer.Typer) -> None:
    """Add the ``serve``, ``submit`` and ``label-studio-webhook`` commands to a Typer application."""
    app.command("serve")(serve_command)
    app.command("submit")(submit_command)
    app.command("label-studio-webhook")(webhook_command)


def serve_command(
    config: Annotated[Path, typer.Option("--config", help="Gate configuration (YAML); its `serve` section.")],
    trusted: Annotated[Path | None, typer.Option("--trusted", help="The trusted replication for every batch.")] = None,
    watch: Annotated[str | None, typer.Option("--watch", help="The drop folder (overrides serve.watch).")] = None,
) -> None:
    """Gate batches as they arrive: files dropped in a folder, and `labelgate.batch.ready` Prefect events."""
    from labelgate.extras import require

    require("prefect", "labelgate serve")  # before anything starts: one line naming the extra, not a traceback
    _log_to_stderr()
    log = logging.getLogger("labelgate.serve")
    try:
        folder = _start(config, trusted, watch, log)
    except Exception as exc:
        raise fail(exc, "check --config, --watch (an existing folder) and PREFECT_API_URL") from None
    stop = threading.Event()
    _stop_on_signals(stop, log)
    try:
        if folder is not None:
            folder.serve(stop)
        else:
            while not stop.wait(3600):  # only the event-triggered deployment serves; it runs in its thread
                pass
    finally:
        if folder is not None:
            folder.close()
    log.info("stopped")


def _start(config: Path, trusted: Path | None, watch: str | None, log: logging.Logger) -> Any:
    """The drop folder of ``labelgate serve`` (None without one), the events-in deployment started."""
    from labelgate.gate import Hooks
    from labelgate.gate.watch import DropFolder, serve_settings
    from labelgate.pipeline.config import GateConfig, load_config
    from labelgate.reporting.report import write_gate_report

    cfg: GateConfig = load_config(config)
    settings = serve_settings(cfg, watch=watch)
    api = _api_url() if settings.events else None
    if not settings.watch and not api:
        raise ValueError("nothing to serve: give --watch FOLDER (or serve.watch), or set PREFECT_API_URL to gate on "
                         "'labelgate.batch.ready' events")
    on_decision: Callable[[dict[str, Any]], object] | None = None
    if api:
        from labelgate.flows.api import require_api
        from labelgate.flows.gate import emit_decided
        from labelgate.flows.serve import DEPLOYMENT_NAME, serve_events_in_background

        require_api()

        def on_decision(summary: dict[str, Any]) -> object:  # through the store's outbox: owed while Prefect is down
            return emit_decided(summary, cfg)

        serve_events_in_background(config, trusted)
        log.info("events: emitting labelgate.gate.decided; deployment labelgate-gate/%s gates on "
                 "labelgate.batch.ready (%s)", DEPLOYMENT_NAME, api)
    else:
        log.info("events: off (%s)", "serve.events is false" if not settings.events else "PREFECT_API_URL is not set")
    folder = None
    if settings.watch:
        from labelgate.gate.audit import Orchestration

        served = Orchestration("in-process", "labelgate serve: a file of its drop folder, in the serving process")
        hooks = Hooks(publish=write_gate_report, logger=logging.getLogger("labelgate.gate"), orchestration=served)
        folder = DropFolder(cfg, settings, trusted=trusted, hooks=hooks, on_decision=on_decision)
        rule = "a .ready marker" if settings.ready_marker else f"{settings.settle_seconds:g} s unmodified"
        log.info("watching %s (%s, arrival: %s, ledger %s)", settings.watch, settings.pattern, rule, settings.state)
    return folder


def _log_to_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    # one line per record, every value escaped: a file name holding a line break cannot forge a line of the log
    handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(message)s"))
    serve_log = logging.getLogger("labelgate.serve")
    serve_log.addHandler(handler)
    serve_log.setLevel(logging.INFO)
    serve_log.propagate = False
    # the gate's own "decision ..." line repeats the served gate's; Prefect and GX speak only when something fails
    for name in ("labelgate.gate", "prefect", "great_expectations", "distributed"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _stop_on_signals(stop: threading.Event, log: logging.Logger) -> None:
    def handle(signum: int, _frame: Any) -> None:
        if stop.is_set():  # the second signal: abandon the running batch (it stays queued for the next start)
            log.info("abandoning the running batch")
            raise SystemExit(128 + signum)
        log.info("stopping after the running batch (%s again abandons it)", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)


def _api_url() -> str | None:
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url).rstrip("/") if url else None


# ------------------------------------------------------------------------------ label-studio-webhook
def webhook_command(
    config: Annotated[Path | None, typer.Option("--config", help="Gate configuration (YAML) whose batch source is "
                                                                 "format: label_studio: batch.ready events for "
                                                                 "`labelgate serve`.")] = None,
    monitor: Annotated[Path | None, typer.Option("--monitor", help="Monitor configuration (YAML) whose source is "
                                                                   "kind: label_studio: one monitor pass per ready "
                                                                   "batch, in this process.")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port, printed).", min=0,
                                      max=65535)] = 8765,
    quiet_seconds: Annotated[float, typer.Option(help="A project's batch is ready once no delivery came for this "
                                                      "long.", min=0, max=86400)] = 30.0,
    max_wait_seconds: Annotated[float | None, typer.Option(help="... or this long after its first delivery "
                                                                "(default 10 × quiet).", min=0,
                                                           max=7 * 86400)] = None,
    secret_env: Annotated[str, typer.Option(help="Environment variable holding the shared secret.")] =
    DEFAULT_SECRET_ENV,
) -> None:
    """Receive Label Studio webhooks (annotation created / updated / deleted): emit `labelgate.batch.ready` (--config)
    and / or run monitor passes (--monitor)."""
    _log_to_stderr()
    log = logging.getLogger("labelgate.serve")
    try:
        receiver, base = webhook_receiver(config, quiet_seconds, max_wait_seconds, secret_env, monitor)
    except Exception as exc:
        raise fail(exc, f"set {secret_env} and the Label Studio URL variable (and PREFECT_API_URL for --config); "
                        "use a format: label_studio batch source or a kind: label_studio monitor source") from None
    stop = threading.Event()
    _stop_on_signals(stop, log)

    def started(bound: int) -> None:
        log.info("listening on http://%s:%d/label-studio/webhook (Label Studio %s; quiet period %g s)", host, bound,
                 base, quiet_seconds)

    try:
        receiver.serve(host, port, stop, on_started=started)
    except Exception as exc:
        raise fail(exc, "choose another --port") from None
    log.info("stopped")


# ---------------------------------------------------------------------------------------------- submit
def submit_and_wait(batch: str | Path, *, batch_id: str | None = None, timeout: float = 600.0,
                    poll_seconds: float = 1.0) -> dict[str, Any]:
    """Hand one batch to a running ``labelgate serve`` and wait for its decision.

    Emits ``labelgate.batch.ready`` (payload ``{"batch_id", "path"}``) and waits for the first
    ``labelgate.gate.decided`` event of that batch id that occurred after it, read from the Prefect API.

    Parameters
    ----------
    batch : path
        The batch file; the server reads it at its absolute path, so it must see the same file system.
    batch_id : str, optional
        The batch id (default: the file's stem).
    timeout : float
        Seconds to wait for the decision.
    poll_seconds : float
        Seconds between two looks at the API's events.

    Returns
    -------
    dict
        The decided event's payload: ``decision``, ``batch_id``, ``reasons``, ``metrics`` (blocking, with intervals),
        ``report``, ``run_id``... (:func:`labelgate.gate.watch.decided_payload`).

    Raises
    ------
    ServeError
        No Prefect API is configured or reachable, no server serves the gate deployment, the file does not exist,
        or no decision came within ``timeout`` (the message is one line).
    """
    from prefect.events import emit_event

    from labelgate.flows.serve import DEPLOYMENT_NAME
    from labelgate.gate.audit import default_batch_id
    from labelgate.gate.watch import READY_EVENT, ServeError, batch_resource_id

    api = _api_url()
    if not api:
        raise ServeError("No LabelGate server to submit to: PREFECT_API_URL is not set (start `labelgate serve` "
                         "with PREFECT_API_URL pointing at a Prefect server, and export it here too).")
    path = Path(batch).resolve()
    if not path.is_file():
        raise ServeError(f"The batch file {str(path)!r} does not exist.")
    name = batch_id or default_batch_id(str(path))
    status = _deployment_status(api, f"labelgate-gate/{DEPLOYMENT_NAME}")
    if status != "READY":
        raise ServeError(f"No LabelGate server is listening at {api}: the deployment labelgate-gate/{DEPLOYMENT_NAME} "
                         f"is {status} (start `labelgate serve --config ...` with PREFECT_API_URL set).")
    since = datetime.now(UTC) - timedelta(seconds=1)  # the server's clock may run a little behind ours
    emit_event(event=READY_EVENT, resource={"prefect.resource.id": batch_resource_id(name)},
               payload={"batch_id": name, "path": str(path)})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        decided = _decided_events(api, batch_resource_id(name), since)
        if decided:
            return dict(decided[0].get("payload") or {})
        time.sleep(poll_seconds)
    raise ServeError(f"No decision for batch {name!r} within {timeout:g} s; the server's log says why.")


def _deployment_status(api: str, name: str) -> str:
    try:
        with urllib.request.urlopen(f"{api}/deployments/name/{name}", timeout=10) as response:
            return str(json.loads(response.read()).get("status") or "unknown").upper()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return "not registered"
        raise
    except OSError as exc:
        from labelgate.gate.watch import ServeError

        raise ServeError(f"The Prefect API at {api} is not reachable ({exc}).") from None


def _decided_events(api: str, resource_id: str, since: datetime) -> list[dict[str, Any]]:
    """The ``labelgate.gate.decided`` events of one batch since a time, oldest first (``POST /events/filter``)."""
    from labelgate.gate.watch import DECIDED_EVENT

    body = {"filter": {"event": {"name": [DECIDED_EVENT]}, "resource": {"id": [resource_id]},
                       "occurred": {"since": since.isoformat()}, "order": "ASC"}, "limit": 10}
    request = urllib.request.Request(f"{api}/events/filter", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return list(json.loads(response.read()).get("events") or [])


def submit_command(
    batch: Annotated[Path, typer.Option("--batch", help="The batch file (the server must see this path).")],
    batch_id: Annotated[str | None, typer.Option("--batch-id", help="Name of the batch in store and reports.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the decision.")] = 600.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decided event's payload as JSON.")] = False,
) -> None:
    """Hand one batch to a running `labelgate serve` and wait for its decision (exit code as `gate`)."""
    from labelgate.extras import require

    require("prefect", "labelgate submit")  # the batch goes to the server as a Prefect event
    try:
        payload = submit_and_wait(batch, batch_id=batch_id, timeout=timeout)
    except Exception as exc:
        raise fail(exc, "start `labelgate serve --config ...` with PREFECT_API_URL set, and export it here") from None
    if as_json:
        typer.echo(json.dumps(payload, default=str))
    else:
        lines = [f"{safe(payload.get('decision'))}  batch {safe(payload.get('batch_id'))}  run: "
                 f"{safe(payload.get('run_id'))}"]
        lines += [f"  reason: {safe(r)}" for r in payload.get("reasons") or []]
        lines += [f"  report: {safe(payload['report'])}"] if payload.get("report") else []
        typer.echo("\n".join(lines))
    raise typer.Exit(EXIT_CODES.get(str(payload.get("decision")), 3))
