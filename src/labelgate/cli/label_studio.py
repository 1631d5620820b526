"""The receiver ``labelgate label-studio-webhook`` (:mod:`labelgate.cli.serve`) serves, built from a gate configuration
and the environment: Label Studio webhooks in, ``labelgate.batch.ready`` events out.

See :mod:`labelgate.flows.label_studio_webhook` for the receiver, and docs/label-studio.md for registering the
webhook in Label Studio.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labelgate.flows.label_studio_webhook import WebhookReceiver

#: The environment variable holding the shared secret by default.
DEFAULT_SECRET_ENV = "LABELGATE_WEBHOOK_SECRET"
#: The environment variable holding the Label Studio URL when the configuration names none.
DEFAULT_URL_ENV = "LABEL_STUDIO_URL"


def webhook_receiver(config: Path, quiet: float, max_wait: float | None,
                     secret_env: str) -> tuple[WebhookReceiver, str]:
    """The receiver of a gate configuration (its ``format: label_studio`` batch source: the server URL from
    ``url_env`` or ``LABEL_STUDIO_URL``, its ``project`` only when set) and the server's URL.

    Raises
    ------
    ValueError
        Not a Label Studio batch source; the URL, the secret or ``PREFECT_API_URL`` unset.
    """
    from labelgate.flows.api import require_api
    from labelgate.flows.label_studio_webhook import WebhookReceiver, emit_ready
    from labelgate.pipeline.config import GateConfig, load_config

    cfg: GateConfig = load_config(config)
    source = cfg.batch
    if source.format != "label_studio":
        raise ValueError(f"the batch source of {config} is format {source.format!r}, not label_studio")
    url_env = source.url_env or DEFAULT_URL_ENV
    base = os.environ.get(url_env, "").strip()
    if not base:
        raise ValueError(f"the Label Studio URL variable {url_env!r} is not set")
    secret = os.environ.get(secret_env, "")
    if not secret:
        raise ValueError(f"the shared secret variable {secret_env!r} is not set")
    from prefect.settings import get_current_settings

    if not get_current_settings().api.url:
        raise ValueError("PREFECT_API_URL is not set: the batch.ready events need the Prefect server that "
                         "`labelgate serve` listens to")
    require_api()
    projects = None if source.project is None else [source.project]
    receiver = WebhookReceiver(secret, quiet_seconds=quiet, max_wait_seconds=max_wait, projects=projects,
                               listeners=[emit_ready(base)])
    return receiver, base
