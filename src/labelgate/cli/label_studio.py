"""The receiver ``labelgate label-studio-webhook`` (:mod:`labelgate.cli.serve`) serves, built from a gate configuration
and / or a monitor configuration and the environment: Label Studio webhooks in, ``labelgate.batch.ready`` events or
monitor passes out; and the batch id of
``labelgate gate --config ls.yaml`` run without ``--batch`` (:func:`configured_batch_id`).

See :mod:`labelgate.flows.label_studio_webhook` for the receiver, and docs/label-studio.md for registering the
webhook in Label Studio.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labelgate.flows.label_studio_webhook import WebhookReceiver
    from labelgate.pipeline.config import Source

#: The environment variable holding the shared secret by default.
DEFAULT_SECRET_ENV = "LABELGATE_WEBHOOK_SECRET"
#: The environment variable holding the Label Studio URL when the configuration names none.
DEFAULT_URL_ENV = "LABEL_STUDIO_URL"


def webhook_receiver(config: Path | None, quiet: float, max_wait: float | None, secret_env: str,
                     monitor: Path | None = None) -> tuple[WebhookReceiver, str]:
    """The receiver of a gate configuration and / or a monitor configuration, and the server's URL.

    With a gate configuration (its ``format: label_studio`` batch source: the server URL from ``url_env`` or
    ``LABEL_STUDIO_URL``, its ``project`` only when set), every ready batch becomes a ``labelgate.batch.ready`` event
    for ``labelgate serve``; with a monitor configuration (``source.kind: label_studio``), every ready batch of its
    project runs one monitor pass in the receiver's process (:func:`labelgate.flows.label_studio_webhook.monitor_pass`).
    Both may be given; the two must then name the same server.

    Raises
    ------
    ValueError
        Neither configuration; not a Label Studio source; the URL, the secret or (for the gate) ``PREFECT_API_URL``
        unset; the two configurations naming different servers.
    """
    from labelgate.flows.label_studio_webhook import Listener, WebhookReceiver, emit_ready, monitor_pass

    if config is None and monitor is None:
        raise ValueError("give --config (a gate configuration: batch.ready events for `labelgate serve`) and / or "
                         "--monitor (a monitor configuration: monitor passes)")
    secret = os.environ.get(secret_env, "")
    listeners: list[Listener] = []
    projects: list[int] | None = []
    bases: list[str] = []
    if config is not None:
        base, source = _gate_side(config)
        gated = source.project
        bases.append(base)
        emit = emit_ready(base, source)
        # with --monitor the receiver also hears the monitor's project: the gate asks only for its own
        listeners.append(emit if gated is None else lambda batch: emit(batch) if batch.project == gated else None)
        projects = None if gated is None or projects is None else [*projects, gated]
    if monitor is not None:
        from labelgate.pipeline.config.monitor import load_monitor_config

        cfg = load_monitor_config(monitor)
        src = cfg.monitor.source
        if src.kind != "label_studio":
            raise ValueError(f"the monitor source of {monitor} is kind {src.kind!r}, not label_studio")
        bases.append(_server_url(src.url_env or DEFAULT_URL_ENV))
        passes, project = monitor_pass(cfg), src.project
        # a receiver that also serves the gate hears every project; the monitor reads one
        listeners.append(lambda batch: passes(batch) if batch.project == project else None)
        projects = None if projects is None or project is None else [*projects, project]
    if len({b.rstrip("/") for b in bases}) > 1:
        raise ValueError(f"the gate and the monitor configurations name different Label Studio servers: {bases}")
    if not secret:
        raise ValueError(f"the shared secret variable {secret_env!r} is not set")
    if config is not None:
        _require_prefect()
    receiver = WebhookReceiver(secret, quiet_seconds=quiet, max_wait_seconds=max_wait,
                               projects=sorted(set(projects)) if projects else None, listeners=listeners)
    return receiver, bases[0]


def _gate_side(config: Path) -> tuple[str, Source]:
    """The server URL and the ``label_studio`` batch source of a gate configuration (its ``project``: None for any)."""
    from labelgate.pipeline.config import GateConfig, load_config

    cfg: GateConfig = load_config(config)
    source = cfg.batch
    if source.format != "label_studio":
        raise ValueError(f"the batch source of {config} is format {source.format!r}, not label_studio")
    return _server_url(source.url_env or DEFAULT_URL_ENV), source


def _require_prefect() -> None:
    """The Prefect server the ``labelgate.batch.ready`` events go to is configured and answers."""
    from prefect.settings import get_current_settings

    from labelgate.flows.api import require_api

    if not get_current_settings().api.url:
        raise ValueError("PREFECT_API_URL is not set: the batch.ready events need the Prefect server that "
                         "`labelgate serve` listens to")
    require_api()


def _server_url(url_env: str) -> str:
    base = os.environ.get(url_env, "").strip()
    if not base:
        raise ValueError(f"the Label Studio URL variable {url_env!r} is not set")
    return base


def configured_batch_id(config: Path) -> str | None:
    """The id of the batch a configuration's source selects (``labelgate gate`` without ``--batch``): for
    ``format: label_studio`` :func:`labelgate.pipeline.sources.label_studio.batch_id_of`, for ``format: sql``
    :func:`sql_batch_id`. None when the configuration does not load (the gate then records that ERROR itself).

    Raises
    ------
    ValueError
        The batch source is a file (it needs ``--batch``).
    """
    from labelgate.errors import LabelGateError
    from labelgate.pipeline.config import GateConfig, load_config

    try:
        cfg: GateConfig = load_config(config)
    except LabelGateError:
        return None
    if cfg.batch.format == "sql":
        return sql_batch_id(cfg.batch)
    if cfg.batch.format != "label_studio":
        raise ValueError(f"no --batch given, and the batch source of {config} is format {cfg.batch.format!r}: only a "
                         "label_studio or sql source selects its own batch")
    from labelgate.pipeline.sources.label_studio import batch_id_of

    return batch_id_of(cfg.batch)


def sql_batch_id(source: Source) -> str:
    """``sql-<digest>``: the id of the batch a ``format: sql`` source's query selects, from the database it reads (the
    value of ``url_env``, never printed), the query (its whitespace collapsed) and the bound ``params``.

    >>> from labelgate.pipeline.config import Source
    >>> a = sql_batch_id(Source(format="sql", url_env="LG_NO_SUCH_VAR", query="SELECT * FROM t WHERE b = :b",
    ...                         params={"b": 1}))
    >>> b = sql_batch_id(Source(format="sql", url_env="LG_NO_SUCH_VAR", query="SELECT *  FROM t\\nWHERE b = :b",
    ...                         params={"b": 1}))
    >>> a == b, a.startswith("sql-"), a == sql_batch_id(Source(format="sql", url_env="LG_NO_SUCH_VAR",
    ...                                                        query="SELECT * FROM t WHERE b = :b", params={"b": 2}))
    (True, True, False)
    """
    import hashlib
    import json

    what = {"database": os.environ.get(source.url_env or "", "").strip(),
            "query": " ".join((source.query or "").split()), "params": source.params}
    return "sql-" + hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:10]
