"""The gate's alerts: at least once per decision, never twice, through the alert ledger.

A decision's alert is keyed by the run that computed it (:func:`labelgate.pipeline.store.gate_alert_key`), so a
request that receives a stored decision re-sends the alert only to the channels that never received it — an alert
that failed is delivered by the next request for the batch — and :func:`retry_alerts` (``labelgate alerts retry``)
does the same for the current decision of every batch. A superseded decision (a later ``--force`` run of the batch)
is not alerted again. Alert delivery never changes a decision.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from labelgate.pipeline import alerts
from labelgate.pipeline.alert_ledger import deliver_once
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
