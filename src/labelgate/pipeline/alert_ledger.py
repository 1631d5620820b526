"""Alerts delivered at least once and never twice: a ledger of outcomes per (dedupe key, channel).

An alert is identified by its dedupe key (what it is about: a drift episode's opening, a gate decision...).
Before sending, the channels that already received the key successfully are looked up in
``labelgate_alert_deliveries`` and skipped; every attempt's outcome is recorded there. So a rerun or a replay
sends nothing again, and a channel that failed is tried again at the next call. Delivery itself is
:func:`labelgate.pipeline.alerts.deliver` (retries, redaction, ``Idempotency-Key`` header on webhooks). Call it
after the transaction that stored the subject of the alert has committed, so that an alert is only ever sent for
something on record.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.engine import Connection

from labelgate.pipeline import alerts
from labelgate.pipeline.database import transaction
from labelgate.pipeline.tables import alert_deliveries_table as ledger

_log = logging.getLogger("labelgate.alerts")


def alert_outcomes(conn: Connection, keys: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The recorded outcome of every channel for each of ``keys`` (keys without any are left out)."""
    out: dict[str, list[dict[str, Any]]] = {}
    if not keys:
        return out
    rows = conn.execute(select(ledger).where(ledger.c.dedupe_key.in_(sorted(set(keys))))
                        .order_by(ledger.c.dedupe_key, ledger.c.channel)).mappings().all()
    for row in rows:
        sent_at = row["sent_at"].isoformat() if row["sent_at"] is not None else None
        out.setdefault(row["dedupe_key"], []).append(
            {"channel": row["channel"], "ok": bool(row["ok"]), "attempts": row["attempts"], "error": row["error"],
             "sent_at": sent_at, "decision": row["decision"], "dedupe_key": row["dedupe_key"]})
    return out


def delivered_channels(engine: Engine, dedupe_key: str) -> set[str]:
    """Labels (:func:`labelgate.pipeline.alerts.channel_label`) of the channels that received ``dedupe_key``."""
    with transaction(engine) as conn:
        rows = conn.execute(
            select(ledger.c.channel).where(ledger.c.dedupe_key == dedupe_key, ledger.c.ok.is_(True))
        ).all()
    return {row[0] for row in rows}


def deliver_once(
    engine: Engine, decision: str, summary: Mapping[str, Any], alerts_config: Any, dedupe_key: str
) -> tuple[list[dict[str, Any]], bool]:
    """Send ``decision``'s alert to every configured channel that has not yet received ``dedupe_key``.

    Returns the outcomes of this call (one per channel tried) and whether every channel has now received it.
    ``notify_on`` is the caller's business: the alert is sent whatever ``alerts_config.notify_on`` says.
    """
    done = delivered_channels(engine, dedupe_key)
    channels = [ch for ch in alerts_config.channels if alerts.channel_label(ch) not in done]
    if not channels:
        return [], True
    settings = alerts_config.model_copy(update={"channels": channels, "notify_on": [decision]})
    outcomes = alerts.deliver(decision, summary, settings, dedupe_key=dedupe_key)
    record(engine, dedupe_key, decision, outcomes)
    for outcome in outcomes:
        if not outcome.get("ok"):
            _log.warning("alert %s to %s failed: %s", dedupe_key, outcome.get("channel"), outcome.get("error"))
    return outcomes, all(o.get("ok") for o in outcomes)


def record(engine: Engine, dedupe_key: str, decision: str, outcomes: list[dict[str, Any]]) -> None:
    """Add ``outcomes`` to the ledger (attempts accumulate; the latest outcome of a channel wins)."""
    with transaction(engine, write=True) as conn:
        for outcome in outcomes:
            where = (ledger.c.dedupe_key == dedupe_key) & (ledger.c.channel == outcome["channel"])
            sent_at = datetime.fromisoformat(outcome["sent_at"]) if outcome.get("sent_at") else None
            values = {"decision": decision, "ok": bool(outcome.get("ok")), "error": outcome.get("error"),
                      "sent_at": sent_at}
            attempts = int(outcome.get("attempts") or 0)
            row = conn.execute(select(ledger.c.attempts).where(where)).first()
            if row is None:
                conn.execute(insert(ledger).values(dedupe_key=dedupe_key, channel=outcome["channel"],
                                                   attempts=attempts, **values))
            else:
                conn.execute(update(ledger).where(where).values(attempts=row[0] + attempts, **values))
