"""The Label Studio webhook receiver: an HTTP endpoint that turns deliveries into ``labelgate.batch.ready`` events.

``labelgate label-studio-webhook --config gate.yaml`` serves ``POST /label-studio/webhook`` (and ``GET /health``).
Every delivery must carry the shared secret in the ``X-LabelGate-Secret`` header (the secret is read from an
environment variable, default ``LABELGATE_WEBHOOK_SECRET``; 401 otherwise, answered from the headers before any of
the body is read); an authorised body is read streamed, at most :data:`MAX_BODY_BYTES` (413), within
:data:`BODY_TIMEOUT_SECONDS` (408), and parsed off the event loop; a valid one is answered 202 at once
(Label Studio waits one second for an answer) and queued in a :class:`~labelgate.gate.ls_webhook.Debouncer`. Once a
project has been quiet for the quiet period, its batch (the tasks whose annotations were created or updated) is handed
to every listener; the default listener emits ``labelgate.batch.ready`` with the project URL selecting those tasks as
``path``, which the served gate (``labelgate serve`` with ``PREFECT_API_URL``) consumes like any batch.

Other consumers register a callback; :func:`monitor_pass` is the one that runs a monitor pass of a ``label_studio``
monitor configuration per ready batch (the tasks it names restated, a reconciliation when it deleted annotations)::

    receiver = WebhookReceiver(secret, projects=[7], listeners=[monitor_pass("monitor.yaml")])

A listener receives a :class:`~labelgate.gate.ls_webhook.ReadyBatch`, runs on the receiver's ticking thread (keep it
short or hand the work over), and a listener that raises is logged and never stops the others.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from labelgate.errors import InputError, Reason
from labelgate.gate.ls_webhook import Debouncer, ReadyBatch, parse_delivery, verify
from labelgate.gate.watch import READY_EVENT, batch_resource_id
from labelgate.pipeline.limits import one_line

#: The route Label Studio posts to.
ROUTE = "/label-studio/webhook"
#: The largest delivery body accepted (bytes).
MAX_BODY_BYTES = 32 * 1024 * 1024
#: Seconds a caller has to send a whole body once its headers are in (Label Studio sends it at once).
BODY_TIMEOUT_SECONDS = 30.0
#: Connections served at once; more are answered 503 by the server before the application sees them.
MAX_CONNECTIONS = 64
LOGGER = logging.getLogger("labelgate.label_studio_webhook")
Listener = Callable[[ReadyBatch], object]


def emit_ready(base_url: str, source: Any = None) -> Listener:
    """The listener that emits ``labelgate.batch.ready`` for a batch with tasks (needs ``PREFECT_API_URL``).

    With the gate's ``label_studio`` batch source, the event's ``batch_id`` is the one the gate derives for the same
    selection (:func:`labelgate.pipeline.sources.label_studio.batch_id_of`), so a batch has one id whether it came
    from a webhook or from a configuration.
    """

    def emit(batch: ReadyBatch) -> None:
        if not batch.task_ids:  # deletions only: nothing new to gate
            return
        from prefect.events import emit_event

        payload = batch.payload(base_url)
        if source is not None:
            from labelgate.pipeline.sources.label_studio import batch_id_of

            payload["batch_id"] = batch_id_of(source.model_copy(update={"path": payload["path"]}))
        emit_event(event=READY_EVENT, resource={"prefect.resource.id": batch_resource_id(payload["batch_id"])},
                   payload=payload)
        LOGGER.info("batch %s ready: project %s, %d tasks", payload["batch_id"], batch.project, len(batch.task_ids))

    return emit


def monitor_pass(config: Any, *, on_summary: Callable[[ReadyBatch, dict[str, Any]], object] | None = None,
                 send_alerts: bool = True) -> Listener:
    """The listener that runs one monitor pass per ready batch
    (:func:`labelgate.monitor.label_studio.run_label_studio_pass`).

    The pass restates the tasks whose annotations were created or updated, plus the tasks changed since the monitor's
    watermark, and reconciles (looks for deleted annotations and tasks) when the batch deleted annotations. A pass that
    fails is recorded as an ``error`` pass and logged by the receiver; the next batch (or a scheduled pass) retries.

    Parameters
    ----------
    config : path, mapping or MonitorConfig
        A monitor configuration whose source is ``kind: label_studio`` (a batch of another project is refused).
    on_summary : callable, optional
        Called with the batch and the pass summary after each pass.
    send_alerts : bool, default True
    """
    from labelgate.monitor.label_studio import run_label_studio_pass
    from labelgate.pipeline.sources.label_studio_delivery import Hints

    def run(batch: ReadyBatch) -> None:
        hints = Hints(frozenset(batch.task_ids), reconcile=bool(batch.deleted_annotations))
        summary = run_label_studio_pass(config, batch.project, hints=hints, send_alerts=send_alerts)
        LOGGER.info("monitor pass on project %s: %d tasks named, %d annotations deleted", batch.project,
                    len(batch.task_ids), len(batch.deleted_annotations))
        if on_summary is not None:
            on_summary(batch, summary)

    return run


class WebhookReceiver:
    """Verified, debounced Label Studio deliveries, handed to listeners.

    Parameters
    ----------
    secret : str
        The shared secret every delivery must carry (non-empty).
    quiet_seconds, max_wait_seconds : float
        See :class:`~labelgate.gate.ls_webhook.Debouncer`.
    projects : iterable of int, optional
        Only these projects' deliveries are queued (others are answered 202 and ignored).
    listeners : iterable of callables, optional
        Called with every ready batch.
    """

    def __init__(self, secret: str, *, quiet_seconds: float = 30.0, max_wait_seconds: float | None = None,
                 projects: Iterable[int] | None = None, listeners: Iterable[Listener] = ()) -> None:
        if not secret:
            raise InputError("The Label Studio webhook receiver needs a non-empty shared secret.",
                             Reason.MISSING_SETTING)
        self._secret = secret
        self.debouncer = Debouncer(quiet_seconds, max_wait_seconds)
        self.projects = None if projects is None else frozenset(int(p) for p in projects)
        self.listeners: list[Listener] = list(listeners)
        self.received = 0
        self.refused = 0

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(batch)`` for every ready batch."""
        self.listeners.append(listener)

    def authorized(self, headers: Any) -> bool:
        """Whether the headers carry the shared secret (counts a refusal when they do not)."""
        if verify(headers, self._secret):
            return True
        self.refused += 1
        return False

    def receive(self, headers: dict[str, str], body: Any, now: float | None = None) -> tuple[int, dict[str, Any]]:
        """Handle one delivery: ``(HTTP status, JSON answer)`` — 401 without the secret, 400 for a body that is not a
        delivery, 202 otherwise (queued, or ignored for another project)."""
        if not self.authorized(headers):
            return 401, {"detail": "missing or wrong X-LabelGate-Secret header"}
        try:
            delivery = parse_delivery(body)
        except InputError as exc:
            self.refused += 1
            return 400, {"detail": exc.message}
        if self.projects is not None and delivery.project not in self.projects:
            return 202, {"queued": False, "detail": f"project {delivery.project} is not gated here"}
        self.debouncer.add(delivery, time.monotonic() if now is None else now)
        self.received += 1
        return 202, {"queued": True, "project": delivery.project}

    def tick(self, now: float | None = None, *, flush: bool = False) -> list[ReadyBatch]:
        """Hand the batches ready at ``now`` (every pending one with ``flush``) to the listeners; return them."""
        ready = self.debouncer.flush() if flush else self.debouncer.due(time.monotonic() if now is None else now)
        for batch in ready:
            for listener in self.listeners:
                try:
                    listener(batch)
                except Exception as exc:  # one listener's failure never stops the others or the receiver
                    LOGGER.error("listener %s failed on batch %s: %s: %s", one_line(repr(listener)), batch.batch_id,
                                 type(exc).__name__, one_line(exc))
        return ready

    def app(self) -> Any:
        """The FastAPI application: ``POST /label-studio/webhook`` and ``GET /health``."""
        from fastapi import FastAPI
        from fastapi.concurrency import run_in_threadpool
        from fastapi.responses import JSONResponse

        app = FastAPI(title="LabelGate Label Studio webhook receiver", docs_url=None, redoc_url=None)

        # plain Starlette routes: the endpoints take the request itself, nothing for FastAPI to inject or validate
        async def health(request: Any) -> JSONResponse:
            return JSONResponse({"status": "ok", "received": self.received, "refused": self.refused,
                                 "pending": self.debouncer.pending()})

        def refuse(status: int, detail: str) -> JSONResponse:
            # the body is left unread: the connection is closed rather than drained
            return JSONResponse({"detail": detail}, status_code=status, headers={"Connection": "close"})

        async def webhook(request: Any) -> JSONResponse:
            # A stranger costs the headers only: the secret is checked before a byte of the body is read, and an
            # authorised body is read streamed, at most MAX_BODY_BYTES, within BODY_TIMEOUT_SECONDS, and parsed off
            # the event loop.
            if not self.authorized(request.headers):
                return refuse(401, "missing or wrong X-LabelGate-Secret header")
            limit = MAX_BODY_BYTES
            size = request.headers.get("content-length")
            if size is not None and size.isdigit() and int(size) > limit:
                return refuse(413, f"a delivery is at most {limit} bytes")
            try:
                raw = await asyncio.wait_for(_bounded_body(request, limit), BODY_TIMEOUT_SECONDS)
            except _BodyTooLargeError:
                return refuse(413, f"a delivery is at most {limit} bytes")
            except TimeoutError:
                return refuse(408, f"the delivery's body was not sent within {BODY_TIMEOUT_SECONDS:g} seconds")
            body = await run_in_threadpool(_json_or_none, raw)
            status, answer = self.receive(dict(request.headers), body)
            return JSONResponse(answer, status_code=status)

        app.router.add_route("/health", health, methods=["GET"])
        app.router.add_route(ROUTE, webhook, methods=["POST"])
        return app

    def serve(self, host: str, port: int, stop: threading.Event, *, tick_seconds: float = 0.5,
              on_started: Callable[[int], object] | None = None) -> None:
        """Serve the application until ``stop`` is set, handing ready batches over every ``tick_seconds``; the
        pending batches are handed over when it stops. ``on_started(port)`` is called once it listens."""
        import uvicorn

        server = uvicorn.Server(uvicorn.Config(self.app(), host=host, port=port, log_level="warning",
                                               lifespan="off", limit_concurrency=MAX_CONNECTIONS,
                                               timeout_keep_alive=5))
        thread = threading.Thread(target=server.run, name="labelgate-ls-webhook", daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not server.started:
            raise OSError(f"the webhook receiver could not listen on {host}:{port}")
        bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
        if on_started is not None:
            on_started(int(bound))
        try:
            while not stop.wait(tick_seconds):
                self.tick()
        finally:
            server.should_exit = True
            thread.join(timeout=10)
            self.tick(flush=True)


class _BodyTooLargeError(Exception):
    """A body longer than the limit (raised while it is read, before the rest is received)."""


async def _bounded_body(request: Any, limit: int) -> bytes:
    """The request's body, read as it streams in; :class:`_BodyTooLargeError` as soon as it passes ``limit`` bytes
    (a chunked body has no Content-Length to refuse it by)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _BodyTooLargeError
        chunks.append(chunk)
    return b"".join(chunks)


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None
