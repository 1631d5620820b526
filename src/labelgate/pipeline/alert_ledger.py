"""Alerts delivered at least once and exactly once per key under concurrency: a ledger per (dedupe key, channel).

An alert is identified by its dedupe key (what it is about: a drift episode's opening, a gate decision...).
Before sending, a call **claims** each channel's row of ``labelgate_alert_deliveries`` in one serialised write
transaction (SQLite's write lock; a PostgreSQL advisory lock): a channel already delivered is skipped, and so is one
another call claimed less than :data:`CLAIM_LEASE_SECONDS` ago (it is sending now). Only the claimed channels are
sent to; the outcome is recorded and the claim released. So four processes deciding the same inputs at once send the
alert once, a rerun or a replay sends nothing again, a channel that failed is tried again at the next call, and a
claim left by a process killed mid-send lapses after the lease, when the next call sends it (at least once across
crashes). Delivery itself is :func:`labelgate.pipeline.alerts.deliver` (retries, redaction, ``Idempotency-Key``
header on webhooks). Call it after the transaction that stored the subject of the alert has committed, so that an
alert is only ever sent for something on record.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.engine import Connection

from labelgate.pipeline import alerts
from labelgate.pipeline.database import ALERT_CLAIM_LOCK, transaction
from labelgate.pipeline.tables import alert_deliveries_table as ledger

_log = logging.getLogger("labelgate.alerts")

#: Seconds a claim holds: longer than any delivery with its retries takes; a claim older than this was left by a
#: process that died while sending, and the next call sends again.
CLAIM_LEASE_SECONDS = 900.0


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


def owed_keys(engine: Engine, channel: str) -> list[str]:
    """The dedupe keys of ``channel`` whose last outcome was a failure (or whose sender died holding its claim)."""
    with transaction(engine) as conn:
        rows = conn.execute(select(ledger.c.dedupe_key).where(ledger.c.channel == channel, ledger.c.ok.is_(False))
                            .order_by(ledger.c.dedupe_key)).all()
    return [row[0] for row in rows]


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
    """Send ``decision``'s alert to every configured channel that has not yet received ``dedupe_key`` and that no
    other call is sending now (claimed first, see the module).

    Returns the outcomes of this call (one per channel tried) and whether every channel has now received it (False
    while another call holds a channel's claim). ``notify_on`` is the caller's business: the alert is sent whatever
    ``alerts_config.notify_on`` says.
    """
    labels = {alerts.channel_label(ch): ch for ch in alerts_config.channels}
    token = str(uuid.uuid4())
    claimed, busy = claim(engine, dedupe_key, decision, list(labels), token)
    if not claimed:
        return [], not busy
    settings = alerts_config.model_copy(update={"channels": [labels[label] for label in claimed],
                                                "notify_on": [decision]})
    outcomes: list[dict[str, Any]] = []
    try:
        outcomes = alerts.deliver(decision, summary, settings, dedupe_key=dedupe_key)
    finally:  # an outcome or not, the claim is released (a crash leaves it to lapse)
        record(engine, dedupe_key, decision, outcomes, token, claimed)
    for outcome in outcomes:
        if not outcome.get("ok"):
            _log.warning("alert %s to %s failed: %s", dedupe_key, outcome.get("channel"), outcome.get("error"))
    return outcomes, not busy and all(o.get("ok") for o in outcomes)


def send_claimed(engine: Engine, dedupe_key: str, channel: str, decision: str,
                 send: Callable[[], tuple[bool, str | None]]) -> bool | None:
    """Claim the one ledger row ``(dedupe_key, channel)``, run ``send() -> (ok, error)`` and record its outcome.

    The outbox for anything owed once that is not a notification block (the ``labelgate.gate.decided`` event owed
    to Prefect). Returns None when there is nothing to do (delivered, or claimed by another call), else ``ok``.
    """
    token = str(uuid.uuid4())
    claimed, _ = claim(engine, dedupe_key, decision, [channel], token)
    if not claimed:
        return None
    ok: bool = False
    error: str | None = "the sender raised"
    try:
        ok, error = send()
    finally:
        outcome = {"channel": channel, "ok": ok, "error": None if ok else error, "attempts": 1,
                   "sent_at": datetime.now(UTC).isoformat() if ok else None}
        record(engine, dedupe_key, decision, [outcome], token, claimed)
    return ok


def claim(engine: Engine, dedupe_key: str, decision: str, channels: list[str],
          token: str) -> tuple[list[str], bool]:
    """Claim ``channels`` of ``dedupe_key`` for the call holding ``token``, in one serialised write transaction.

    Returns the channels claimed (not yet delivered, and not claimed by another call within the lease) and whether
    another call holds a live claim on any of the others.
    """
    now = datetime.now(UTC)
    lapsed = now - timedelta(seconds=CLAIM_LEASE_SECONDS)
    claimed, busy = [], False
    with transaction(engine, write=True, lock=ALERT_CLAIM_LOCK) as conn:
        for channel in channels:
            where = (ledger.c.dedupe_key == dedupe_key) & (ledger.c.channel == channel)
            row = conn.execute(select(ledger.c.ok, ledger.c.claim, ledger.c.claimed_at).where(where)).first()
            if row is None:
                conn.execute(insert(ledger).values(dedupe_key=dedupe_key, channel=channel, decision=decision,
                                                   ok=False, attempts=0, claim=token, claimed_at=now))
            elif row.ok:
                continue
            elif row.claim is not None and row.claimed_at is not None and _aware(row.claimed_at) > lapsed:
                busy = True
                continue
            else:
                conn.execute(update(ledger).where(where).values(claim=token, claimed_at=now))
            claimed.append(channel)
    return claimed, busy


def _aware(moment: datetime) -> datetime:
    # SQLite hands timezone-aware columns back naive (they were stored in UTC)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def record(engine: Engine, dedupe_key: str, decision: str, outcomes: list[dict[str, Any]],
           token: str | None = None, claimed: list[str] | None = None) -> None:
    """Add ``outcomes`` to the ledger (attempts accumulate; the latest outcome of a channel wins) and release the
    claim ``token`` holds on the ``claimed`` channels (a claim another call took since, after the lease, is left)."""
    with transaction(engine, write=True, lock=ALERT_CLAIM_LOCK) as conn:
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
        if token is not None:
            for channel in claimed or []:
                conn.execute(update(ledger).where((ledger.c.dedupe_key == dedupe_key) & (ledger.c.channel == channel)
                                                  & (ledger.c.claim == token)).values(claim=None, claimed_at=None))
