"""The gate as a served Prefect deployment triggered by the event ``labelgate.batch.ready`` (no worker, no pool).

Any pipeline asks for a gate with two lines (``PREFECT_API_URL`` pointing at the server)::

    from prefect.events import emit_event
    emit_event(event="labelgate.batch.ready", resource={"prefect.resource.id": "labelgate.batch.b42"},
               payload={"batch_id": "b42", "path": "/data/batches/b42.csv"})

or, for a batch that lives in a database, names a SQL source of the configuration (``sources:``) and the values of
its ``:name`` placeholders — never SQL, never credentials::

    payload={"batch_id": "b42", "source": {"name": "vendor_db", "params": {"batch": "b42"}}}

The trigger starts a run of :func:`labelgate.flows.gate.gate_flow` with ``batch`` and ``batch_id`` from the payload
and ``config`` / ``trusted`` / ``roots`` from the deployment (a ``path`` that resolves outside the drop folder,
``serve.roots`` and the folder of ``batch.path`` is an ERROR, and the file is not read); the run emits
``labelgate.gate.decided`` like every gate run. ``labelgate serve`` serves it next to the drop folder when a Prefect
API is configured.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from labelgate.flows.gate import gate_flow
from labelgate.gate.watch import READY_EVENT, event_roots

DEPLOYMENT_NAME = "labelgate-gate-on-event"


def event_deployment(config: str | Path, trusted: str | Path | None = None, name: str = DEPLOYMENT_NAME) -> Any:
    """The ``RunnerDeployment`` of :func:`gate_flow` with its ``labelgate.batch.ready`` trigger.

    Parameters
    ----------
    config : path
        The gate configuration; its absolute path is the deployment's parameter.
    trusted : path, optional
        The trusted replication for every triggered run (default: the configuration's).
    name : str
        Deployment name (the deployment is ``labelgate-gate/<name>``).
    """
    from prefect.events import DeploymentEventTrigger

    from labelgate.pipeline.config import load_config

    # an event names a path; only files inside these folders are read (the trigger cannot change this parameter)
    parameters: dict[str, Any] = {"config": str(Path(config).resolve()),
                                  "roots": event_roots(load_config(config))}
    if trusted is not None:
        parameters["trusted"] = str(Path(trusted).resolve())
    trigger = DeploymentEventTrigger(
        expect={READY_EVENT}, match={"prefect.resource.id": "labelgate.batch.*"},
        # .get: an event carries either a path or a named SQL source; the other renders as None, not as an error
        parameters={"batch_id": "{{ event.payload.batch_id }}", "batch": "{{ event.payload.get('path') }}",
                    "source": "{{ event.payload.get('source') }}"})
    return gate_flow.to_deployment(name=name, parameters=parameters, triggers=[trigger])


def serve_events(config: str | Path, trusted: str | Path | None = None, name: str = DEPLOYMENT_NAME) -> None:
    """Serve :func:`event_deployment` (blocks; needs ``PREFECT_API_URL`` of a Prefect server)."""
    from prefect import serve

    serve(event_deployment(config, trusted, name))


def serve_events_in_background(config: str | Path, trusted: str | Path | None = None,
                               name: str = DEPLOYMENT_NAME) -> threading.Thread:
    """:func:`event_deployment` served by a Prefect runner in a daemon thread (``labelgate serve``'s main thread
    watches the drop folder and owns the signals); triggered runs are subprocesses of this process."""
    from prefect.runner import Runner

    runner = Runner(name=f"labelgate-serve-{name}", pause_on_shutdown=False)
    runner.add_deployment(event_deployment(config, trusted, name))
    thread = threading.Thread(target=asyncio.run, args=(runner.start(),), name="labelgate-events-in", daemon=True)
    thread.start()
    return thread
