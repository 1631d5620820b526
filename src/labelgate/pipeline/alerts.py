"""Alert delivery of the gate through Prefect notification blocks (generic webhook, Slack, any saved block).

:func:`deliver` sends one message per configured channel when the decision is in ``alerts.notify_on``, with
``raise_on_failure`` and retries, and returns one outcome dict per channel. It never raises and never logs a
URL (webhook URLs are secrets): a failed delivery is an outcome with ``ok=False``, recorded in the alert ledger
(:mod:`labelgate.pipeline.alert_ledger`); it never changes the decision.

Blocks built from a URL (``webhook`` / ``slack`` channels) need no Prefect API and no flow: ``notify`` is a
plain HTTP call (verified with Prefect 3.8.8, ephemeral server disabled). Only ``prefect_block`` channels,
which load a saved block, need an API (the ephemeral one inside the gate flow).
See ``docs/store-and-alerts.md``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from labelgate.extras import install_hint, missing_modules

__all__ = ["build_message", "deliver"]

_log = logging.getLogger("labelgate.pipeline.alerts")
_URL_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")
_RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_MAX_REASONS = 10
_MAX_METRICS = 20
# Third-party loggers that can print a request URL (httpx logs "HTTP Request: POST <url>" at INFO).
_URL_LOGGERS = ("httpx", "httpcore.connection", "httpcore.http11", "apprise", "urllib3.connectionpool")
#: Bare block names are looked up among these block type slugs, in this order.
_BARE_NAME_TYPES = ("custom-webhook", "slack-webhook")


class _ChannelError(Exception):
    """A channel cannot be used at all (missing env var, unknown block): no retry."""


def build_message(decision: str, summary: Mapping[str, Any],
                  dedupe_key: str | None = None) -> tuple[str, dict[str, Any]]:
    """Subject and JSON payload of an alert.

    Parameters
    ----------
    decision : str
        The gate decision.
    summary : mapping
        The run summary, typically ``GateRecord.to_dict()``: ``batch_id``, ``reasons``, ``metrics``
        (``question -> metric -> {"value", "ci_low", "ci_high", ...}``) and optionally ``run_id``,
        ``batch_hash``, ``config_hash``, ``reports``. A ``headline`` mapping, if present, replaces the
        metrics digest.
    dedupe_key : str, optional
        Echoed in the payload so that a receiver can drop duplicates (e.g. ``"<batch_hash>:<config_hash>"``).

    Returns
    -------
    subject : str
        ``"LabelGate: <DECISION> batch <batch_id>"``.
    payload : dict
        JSON-ready: ``text`` (= subject, for Slack-compatible receivers), ``subject``, ``decision``,
        ``batch_id``, ``run_id``, ``batch_hash``, ``config_hash``, ``reasons`` (first 10), ``n_reasons``,
        ``next_steps`` (what to do next about a REVIEW or REJECT, :mod:`labelgate.gate.next_steps`; first 10),
        ``metrics`` (``"question/metric" -> {"value", "ci_low", "ci_high"}``, first 20), ``reports``,
        ``dedupe_key``. NaN becomes null.

    Examples
    --------
    >>> subject, payload = build_message("REJECT", {"batch_id": "b7", "reasons": ["kappa 0.41 < 0.8"],
    ...     "metrics": {"label": {"normalized_cross_kappa": {"value": 0.41, "ci_low": 0.3, "ci_high": 0.5,
    ...                                                       "n_items": 80}}}})
    >>> subject
    'LabelGate: REJECT batch b7'
    >>> payload["metrics"]
    {'label/normalized_cross_kappa': {'value': 0.41, 'ci_low': 0.3, 'ci_high': 0.5}}
    """
    batch_id = str(summary.get("batch_id", "?"))
    subject = f"LabelGate: {decision} batch {batch_id}"
    reasons = [str(r) for r in (summary.get("reasons") or [])]
    headline = summary.get("headline")
    metrics = _clean(headline) if isinstance(headline, Mapping) else _headline(summary.get("metrics") or {})
    payload = {
        "text": subject,
        "subject": subject,
        "decision": decision,
        "batch_id": batch_id,
        "run_id": summary.get("run_id"),
        "batch_hash": summary.get("batch_hash"),
        "config_hash": summary.get("config_hash"),
        "reasons": reasons[:_MAX_REASONS],
        "n_reasons": len(reasons),
        "next_steps": [str(line) for line in (summary.get("next_steps") or [])][:_MAX_REASONS],
        "metrics": metrics,
        "reports": _clean(summary.get("reports") or {}),
        "dedupe_key": dedupe_key,
    }
    return subject, _clean(payload)


def deliver(decision: str, summary: Mapping[str, Any], alerts_config: Any, *, dedupe_key: str | None = None,
            backoff_seconds: float = 0.5) -> list[dict[str, Any]]:
    """Send the alert of one gate run to every configured channel; never raises.

    Parameters
    ----------
    decision : {"ACCEPT", "REJECT", "REVIEW", "ERROR"}
        The gate decision; nothing is sent unless it is in ``alerts_config.notify_on``.
    summary : mapping
        Run summary (see :func:`build_message`).
    alerts_config : labelgate.pipeline.config.Alerts
        ``channels`` (``webhook`` / ``slack`` with ``url_env``, or ``prefect_block`` with ``block``),
        ``notify_on``, ``retries`` (extra attempts after the first), ``timeout_seconds`` (per attempt).
    dedupe_key : str, optional
        Put in the payload (and in an ``Idempotency-Key`` header for ``webhook`` channels).
    backoff_seconds : float, default 0.5
        Wait before retry k (k = 1, 2, ...) is ``backoff_seconds * 2 ** (k - 1)``.

    Returns
    -------
    list of dict
        One outcome per channel: ``channel`` (type and env var / block name, never the URL), ``type``, ``ok``,
        ``attempts`` (0 when the channel could not be set up), ``error`` (None on success), ``sent_at`` (ISO
        time of the successful attempt, else None), ``decision``, ``dedupe_key``. Empty when the decision is
        not in ``notify_on`` or no channel is configured.

    Notes
    -----
    ``webhook`` channels POST the JSON payload of :func:`build_message` with a
    ``CustomWebhookNotificationBlock``; ``slack`` channels send a text message with ``SlackWebhook`` (its
    URL may be any apprise URL, e.g. ``json://host:port/path``); ``prefect_block`` channels load a saved
    block (``"<block-type-slug>/<name>"``, or a bare name looked up among Custom Webhook then Slack Webhook
    blocks). Every call runs inside ``with block.raise_on_failure():`` so that apprise failures raise.
    HTTP 4xx other than 408/425/429 are not retried. ``alerts_config.timeout_seconds`` overrides a block's
    own timeout.

    Examples
    --------
    >>> from labelgate.pipeline.config import Alerts
    >>> deliver("ACCEPT", {"batch_id": "b1"}, Alerts())    # ACCEPT is not in notify_on by default
    []
    >>> import os; _ = os.environ.pop("LG_DOCTEST_HOOK", None)
    >>> cfg = Alerts(channels=[{"type": "webhook", "url_env": "LG_DOCTEST_HOOK"}])
    >>> out = deliver("REJECT", {"batch_id": "b1"}, cfg)
    >>> out[0]["ok"], out[0]["attempts"], out[0]["error"]
    (False, 0, "environment variable 'LG_DOCTEST_HOOK' is not set")
    """
    try:
        if decision not in alerts_config.notify_on or not alerts_config.channels:
            return []
        subject, payload = build_message(decision, summary, dedupe_key)
    except Exception as exc:  # never raise from alert delivery
        _logger().error("LabelGate alerts: cannot build the message: %s", _redact(str(exc)))
        return [_outcome(ch, decision, dedupe_key, attempts=0, error=f"cannot build the message: "
                         f"{_redact(str(exc))}") for ch in getattr(alerts_config, "channels", [])]
    missing = missing_modules("prefect")
    if missing:  # the channels are Prefect notification blocks: without Prefect they stay owed, named as such
        error = f"alert channels need the 'prefect' extra ({install_hint('prefect')}); missing: {', '.join(missing)}"
        _logger().error("LabelGate alerts not sent: %s", error)
        return [_outcome(ch, decision, dedupe_key, attempts=0, error=error) for ch in alerts_config.channels]
    outcomes = []
    for channel in alerts_config.channels:
        try:
            outcomes.append(_deliver_one(channel, decision, subject, payload, alerts_config, dedupe_key,
                                         backoff_seconds))
        except Exception as exc:  # a bug here must not cost the gate its decision or its record
            error = f"unexpected error: {_redact(_describe(exc))[:300]}"
            _logger().error("LabelGate alert via %s: %s", channel_label(channel), error)
            outcomes.append(_outcome(channel, decision, dedupe_key, attempts=0, error=error))
    return outcomes


# --- one channel ------------------------------------------------------------------------------------------


def _deliver_one(channel: Any, decision: str, subject: str, payload: dict, cfg: Any, dedupe_key: str | None,
                 backoff_seconds: float) -> dict[str, Any]:
    secrets: list[str] = []  # filled as soon as the URL is known; the log filter reads it live
    with _redacted_third_party_logs(secrets):
        return _attempts(channel, decision, subject, payload, cfg, dedupe_key, backoff_seconds, secrets)


def _attempts(channel: Any, decision: str, subject: str, payload: dict, cfg: Any, dedupe_key: str | None,
              backoff_seconds: float, secrets: list[str]) -> dict[str, Any]:
    label = channel_label(channel)
    try:
        block = _make_block(channel, cfg, dedupe_key, secrets)
        body = _body_for(block, payload)
    except Exception as exc:
        setup_error = _redact(_describe(exc), secrets)[-300:]
        _logger().warning("LabelGate alert via %s not sent: %s", label, setup_error)
        return _outcome(channel, decision, dedupe_key, attempts=0, error=setup_error)
    attempts = 1 + int(cfg.retries)
    error: str | None = None
    for attempt in range(1, attempts + 1):
        try:
            with block.raise_on_failure():
                _notify(block, body, subject)
            sent_at = datetime.now(UTC).isoformat()
            _logger().info("LabelGate alert (%s) sent via %s (attempt %d).", decision, label, attempt)
            return _outcome(channel, decision, dedupe_key, attempts=attempt, ok=True, sent_at=sent_at)
        except Exception as exc:
            error = _redact(_describe(exc), secrets)[-300:]
            _logger().warning("LabelGate alert via %s failed (attempt %d/%d): %s", label, attempt, attempts,
                              error)
            if not _retryable(exc):
                break
            if attempt < attempts:
                time.sleep(backoff_seconds * 2 ** (attempt - 1))
    _logger().error("LabelGate alert (%s) via %s NOT delivered after %d attempt(s): %s", decision, label,
                    attempt, error)
    return _outcome(channel, decision, dedupe_key, attempts=attempt, error=error)


def _make_block(channel: Any, cfg: Any, dedupe_key: str | None, secrets: list[str]) -> Any:
    """The notification block of a channel; its URL (and URL parts) are appended to ``secrets``."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock, SlackWebhook
    from pydantic import SecretStr

    timeout = float(cfg.timeout_seconds)
    if channel.type == "prefect_block":
        # apprise logs the URL while the block loads: the scheme:// regex of the log filter scrubs it
        block = _load_block(channel.block)
        secrets.extend(_secret_parts(_block_url(block)))
    else:
        url = os.environ.get(channel.url_env or "", "")
        if not url:
            raise _ChannelError(f"environment variable {channel.url_env!r} is not set")
        secrets.extend(_secret_parts(url))
        if channel.type == "webhook":
            headers = {"Content-Type": "application/json"}
            if dedupe_key:
                headers["Idempotency-Key"] = dedupe_key
            # form_data "{{body}}" sends our JSON text verbatim (json_data would re-template its strings).
            block = CustomWebhookNotificationBlock(name="labelgate", url=url, method="POST",
                                                   form_data="{{body}}", headers=headers, cookies=None,
                                                   timeout=timeout)
        else:
            block = SlackWebhook(url=SecretStr(url))
    _apply_timeout(block, timeout)
    return block


def _load_block(name: str | None) -> Any:
    from prefect.blocks.abstract import NotificationBlock
    from prefect.blocks.core import Block

    if not name:
        raise _ChannelError("channel type 'prefect_block' needs 'block'")
    slugs = [name] if "/" in name else [f"{slug}/{name}" for slug in _BARE_NAME_TYPES]
    block = None
    for slug in slugs:
        try:
            block = Block.load(slug, _sync=True)  # type: ignore[call-arg]  # async_dispatch keyword
            break
        except ValueError as exc:
            if "Unable to find block document" not in str(exc):  # e.g. "No Prefect API URL provided"
                raise
            continue
    if block is None:
        raise _ChannelError(f"no saved Prefect block {' or '.join(map(repr, slugs))}")
    if not isinstance(block, NotificationBlock):
        raise _ChannelError(f"Prefect block {name!r} is a {type(block).__name__}, not a notification block")
    return block


def _apply_timeout(block: Any, timeout: float) -> None:
    if hasattr(block, "timeout"):  # CustomWebhookNotificationBlock: httpx timeout per request
        block.timeout = timeout
    # Apprise-based blocks (Slack...): apprise's socket timeouts default to 4 s connect / 4 s read.
    for server in getattr(block, "_apprise_client", None) or ():
        server.socket_connect_timeout = timeout
        server.socket_read_timeout = timeout
    client = getattr(block, "_apprise_client", None)
    if client is not None and len(client) == 0:
        # SlackWebhook silently sends nothing to a URL apprise does not recognise (e.g. a plain http://host).
        raise _ChannelError("the URL is not a Slack webhook (https://hooks.slack.com/services/...) nor an "
                            "apprise URL such as json://host:port/path")


def _body_for(block: Any, payload: dict) -> str:
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    if isinstance(block, CustomWebhookNotificationBlock):
        return json.dumps(payload, allow_nan=False)
    return _text_body(payload)


def _text_body(payload: dict) -> str:
    lines = [f"Decision: {payload['decision']}  batch: {payload['batch_id']}"]
    if payload.get("run_id"):
        lines.append(f"Run: {payload['run_id']}")
    lines += [f"- {reason}" for reason in payload["reasons"]]
    if payload["n_reasons"] > len(payload["reasons"]):
        lines.append(f"- ... {payload['n_reasons'] - len(payload['reasons'])} more reason(s)")
    if payload.get("next_steps"):
        lines.append("Next steps:")
        lines += [f"- {line}" for line in payload["next_steps"]]
    for name, m in payload["metrics"].items():
        if not isinstance(m, Mapping):
            lines.append(f"{name}: {m}")
            continue
        low, high = m.get("ci_low"), m.get("ci_high")
        interval = f" [{_fmt(low)}, {_fmt(high)}]" if low is not None else ""
        lines.append(f"{name}: {_fmt(m.get('value'))}{interval}")
    return "\n".join(lines)


def _notify(block: Any, body: str, subject: str) -> None:
    notify = block.notify
    if hasattr(notify, "aio"):
        # Prefect's async_dispatch would return an un-awaited coroutine (and send nothing) when called from a
        # running event loop or an async flow; force the synchronous implementation.
        notify(body=body, subject=subject, _sync=True)
        return
    result = notify(body=body, subject=subject)
    if inspect.isawaitable(result):
        _run_coroutine(result)


def _run_coroutine(awaitable: Any) -> None:
    # asyncio.run in a helper thread works whether or not this thread already runs an event loop.
    errors: list[BaseException] = []

    def runner() -> None:
        async def wrapped() -> None:
            await awaitable
        try:
            asyncio.run(wrapped())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=runner, daemon=True)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


# --- outcomes, errors, logging ----------------------------------------------------------------------------


def _outcome(channel: Any, decision: str, dedupe_key: str | None, *, attempts: int, ok: bool = False,
             error: str | None = None, sent_at: str | None = None) -> dict[str, Any]:
    return {"channel": channel_label(channel), "type": getattr(channel, "type", None), "ok": ok,
            "attempts": attempts, "error": error, "sent_at": sent_at, "decision": decision,
            "dedupe_key": dedupe_key}


def channel_label(channel: Any) -> str:
    """How an outcome names its channel: the type and the env var or block name, never the URL."""
    kind = getattr(channel, "type", "?")
    target = getattr(channel, "block", None) if kind == "prefect_block" else getattr(channel, "url_env", None)
    return f"{kind}:{target}"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ModuleNotFoundError):  # Prefect or httpx gone while a block was being made
        return f"{type(exc).__name__}: {exc}"
    import httpx
    from prefect.blocks.abstract import NotificationError

    if isinstance(exc, _ChannelError):
        return str(exc)
    if isinstance(exc, httpx.HTTPStatusError):  # its str() holds the URL
        return f"HTTP {exc.response.status_code} {exc.response.reason_phrase}".strip()
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    if isinstance(exc, NotificationError):  # str() is empty; the apprise log says what happened
        log = " ".join(line.strip() for line in (exc.log or "").splitlines() if line.strip())
        return f"notification failed: {log or 'no detail from apprise'}"
    return f"{type(exc).__name__}: {exc}"


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, ModuleNotFoundError):
        return False
    import httpx
    from prefect.blocks.abstract import NotificationError

    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code in _RETRYABLE_STATUS
    return isinstance(exc, (httpx.TransportError, NotificationError, OSError, TimeoutError))


def _redact(message: str, secrets: list[str] | tuple[str, ...] = ()) -> str:
    for secret in secrets:
        if secret:
            message = message.replace(secret, "<redacted>")
    return _URL_PATTERN.sub("<url>", message)


def _secret_parts(url: str) -> list[str]:
    """The URL and the parts of it that carry tokens (path, query, user info), longest first.

    Libraries log pieces of the URL (urllib3: "... with url: /services/T0/B0/XYZ"), so each piece is scrubbed.
    """
    from urllib.parse import urlsplit

    parts = [url]
    try:
        split = urlsplit(url)
        parts += [split.path, split.query, split.path + ("?" + split.query if split.query else "")]
        if "@" in split.netloc:
            parts.append(split.netloc.rsplit("@", 1)[0])
    except ValueError:
        pass
    # a bare "/" or a very short piece would redact unrelated text
    return sorted({p for p in parts if p and len(p.strip("/")) >= 4}, key=len, reverse=True)


class _RedactFilter(logging.Filter):
    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is not ours to fix
            return True
        redacted = _redact(message, self.secrets)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


@contextmanager
def _redacted_third_party_logs(secrets: list[str]) -> Iterator[None]:
    """While sending, scrub URLs from the records of httpx/httpcore/apprise (whatever their level)."""
    loggers = [logging.getLogger(name) for name in _URL_LOGGERS]
    filt = _RedactFilter(secrets)
    for logger in loggers:
        logger.addFilter(filt)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(filt)


def _block_url(block: Any) -> str:
    url = getattr(block, "url", "")
    getter = getattr(url, "get_secret_value", None)
    return str(getter() if callable(getter) else url or "")


def _logger() -> logging.Logger | logging.LoggerAdapter:
    # Inside a flow/task the run logger ships the message to the Prefect UI; elsewhere a standard logger.
    try:
        from prefect.exceptions import MissingContextError
        from prefect.logging import get_run_logger
    except ImportError:  # pragma: no cover
        return _log
    try:
        return get_run_logger()
    except MissingContextError:
        return _log


def _headline(metrics: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for question, per_metric in metrics.items():
        if not isinstance(per_metric, Mapping):
            continue
        for name, m in per_metric.items():
            if len(out) >= _MAX_METRICS:
                return out
            if isinstance(m, Mapping):
                out[f"{question}/{name}"] = {k: _clean(m.get(k)) for k in ("value", "ci_low", "ci_high")}
            elif isinstance(m, (int, float)):
                out[f"{question}/{name}"] = {"value": _clean(m)}
    return out


def _clean(value: Any) -> Any:
    """JSON-safe copy: NaN/inf -> None, unknown objects -> str."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if callable(getattr(value, "item", None)):  # numpy scalar
        return _clean(value.item())
    return str(value)


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
