"""The gate's alerts: at least once per decision, never twice, through the alert ledger.

A decision's alert is keyed by the run that computed it (:func:`labelgate.pipeline.store.gate_alert_key`), so a
request that receives a stored decision re-sends the alert only to the channels that never received it — an alert
that failed is delivered by the next request for the batch — and :func:`retry_alerts` (``labelgate alerts retry``)
does the same for the current decision of every batch. A superseded decision (a later ``--force`` run of the batch)
is not alerted again. Alert delivery never changes a decision.

The ``labelgate.gate.decided`` event each request owes a configured Prefect API goes through the same ledger, as the
outbox channel :data:`EVENT_CHANNEL` keyed by the request's run (:func:`deliver_event`): it is claimed, sent
synchronously by the orchestrator's sender, and its outcome recorded; an event Prefect did not take (the API down) is
owed until :func:`retry_events` (``labelgate alerts retry``, with the API back) delivers it, once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from labelgate.pipeline import alerts
from labelgate.pipeline.alert_ledger import deliver_once, owed_keys, send_claimed
from labelgate.pipeline.config import GateConfig
from labelgate.pipeline.store import GateRecord, ResultsStore, gate_alert_key, record_summary

_LOG = logging.getLogger("labelgate.gate")


def alert_run(store: ResultsStore | None, cfg: GateConfig | None, summary: Mapping[str, Any],
              logger: Any = _LOG) -> list[dict[str, Any]]:
    """Send the alert of one request's decision where it is still owed; returns this call's outcomes."""
    if cfg is None or not cfg.alerts.channels or summary["decision"] not in cfg.alerts.notify_on:
        return []
    key = gate_alert_key(summary.get("reused_from") or summary["run_id"])
    try:
        if store is None:  # the store was not reached: send without the ledger rather than not at all
            outcomes = alerts.deliver(summary["decision"], summary, cfg.alerts, dedupe_key=key)
        else:
            outcomes, _ = deliver_once(store.engine, summary["decision"], summary, cfg.alerts, key)
    except Exception as exc:  # the decision is recorded already; an alert fault must not change it
        logger.warning("alerts of run %s could not be sent or recorded: %s", summary["run_id"], exc)
        return []
    for outcome in outcomes:
        if not outcome.get("ok"):
            logger.warning("alert to %s failed: %s", outcome.get("channel"), outcome.get("error"))
    return outcomes


def retry_alerts(store: ResultsStore, cfg: GateConfig, *, batch_id: str | None = None,
                 since: datetime | None = None) -> dict[str, list[dict[str, Any]]]:
    """Send every alert still owed for the current decision of each batch id (of one, or since a time).

    Returns ``run_id -> outcomes`` of the runs for which something was sent.
    """
    current: dict[str, GateRecord] = {}
    for record in store.list_runs(None, batch_id=batch_id, since=since):  # newest first
        current.setdefault(record.batch_id, record)
    sent: dict[str, list[dict[str, Any]]] = {}
    for record in current.values():
        outcomes = alert_run(store, cfg, record_summary(record))
        if outcomes:
            sent[record.run_id] = outcomes
    return sent


#: The outbox channel of the ``labelgate.gate.decided`` event owed to Prefect, in the alert ledger.
EVENT_CHANNEL = "prefect-event:labelgate.gate.decided"
_EVENT_KEY = "labelgate-gate-event:"


def event_key(run_id: str) -> str:
    """The outbox key of the decided event of the request ``run_id`` (one event per request, served or computed)."""
    return f"{_EVENT_KEY}{run_id}"


def deliver_event(store: ResultsStore | None, summary: Mapping[str, Any], send: Callable[[Mapping[str, Any]], object],
                  logger: Any = _LOG) -> bool | None:
    """Send the decided event of one request through the outbox: claimed, ``send(summary)`` (which raises when the
    event was not taken), outcome recorded.

    Returns whether it was sent, or None when there was nothing to send (delivered before, or being sent by another
    call). Without a store (not reached) the event is sent once without the ledger. Never raises.
    """

    def attempt() -> tuple[bool, str | None]:
        try:
            send(summary)
        except Exception as exc:  # owed, and sent again by `labelgate alerts retry`; the decision stands
            logger.warning("the decided event of batch %r (run %s) was not delivered and is owed: %s: %s",
                           summary.get("batch_id"), summary.get("run_id"), type(exc).__name__, exc)
            return False, f"{type(exc).__name__}: {exc}"[:500]
        return True, None

    if store is None or not summary.get("run_id"):
        return attempt()[0]
    try:
        return send_claimed(store.engine, event_key(str(summary["run_id"])), EVENT_CHANNEL,
                            str(summary.get("decision", "ERROR")), attempt)
    except Exception as exc:  # the ledger is not reachable: the event is still sent, once, without it
        logger.warning("the events outbox could not be used (%s): sending without it", exc)
        return attempt()[0]


def retry_events(store: ResultsStore, send: Callable[[Mapping[str, Any]], object], *, batch_id: str | None = None,
                 since: datetime | None = None, logger: Any = _LOG) -> dict[str, bool]:
    """Send every decided event still owed (of one batch id, or of requests since a time): ``run_id -> sent``."""
    out: dict[str, bool] = {}
    for key in owed_keys(store.engine, EVENT_CHANNEL):
        record = store.get(key.removeprefix(_EVENT_KEY))
        if record is None or (batch_id is not None and record.batch_id != batch_id):
            continue
        created = record.created_at if record.created_at.tzinfo else record.created_at.replace(tzinfo=UTC)
        if since is not None and created < (since if since.tzinfo else since.replace(tzinfo=UTC)):
            continue
        sent = deliver_event(store, record_summary(record), send, logger)
        if sent is not None:
            out[record.run_id] = sent
    return out
