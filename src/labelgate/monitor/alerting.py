"""Episode alerts: one when an episode opens, one when it closes, through the gate's channels, never twice.

Each transition has a dedupe key ``labelgate-monitor:<monitor>:<episode_id>:<open|close>`` (episode ids are
deterministic, see :func:`labelgate.monitor.drift.episode_id`). Before sending, the outcomes recorded in
``labelgate_monitor_alerts`` are read: a channel that already received the transition is skipped, so a rerun
of the monitor over the same windows (or a replay) sends nothing again, and a channel that failed is
retried at the next pass. Delivery goes through :func:`labelgate.pipeline.alerts.deliver` (retries, redaction of
URLs, ``Idempotency-Key`` header on webhooks) with the decision ``DRIFT_OPEN`` / ``DRIFT_CLOSED``; it
happens after the pass's transaction commits, so an alert is only sent for a stored episode.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, insert, select, update

from labelgate.monitor.config import MonitorConfig
from labelgate.monitor.schema import alerts_table, episodes_table, write_transaction
from labelgate.pipeline import alerts

_log = logging.getLogger("labelgate.monitor")
DECISIONS = {"open": "DRIFT_OPEN", "close": "DRIFT_CLOSED"}


def channel_label(channel: Any) -> str:
    """How :func:`labelgate.pipeline.alerts.deliver` names a channel in its outcomes (never the URL)."""
    kind = getattr(channel, "type", "?")
    target = getattr(channel, "block", None) if kind == "prefect_block" else getattr(channel, "url_env", None)
    return f"{kind}:{target}"


def dedupe_key(monitor: str, episode_id: str, transition: str) -> str:
    """The dedupe key of one transition of one episode."""
    return f"labelgate-monitor:{monitor}:{episode_id}:{transition}"


def send_pending(engine: Engine, config: MonitorConfig) -> list[dict[str, Any]]:
    """Send every episode transition not yet delivered to every channel; returns the new outcomes."""
    monitor = config.monitor.name
    e = episodes_table
    with engine.connect() as conn:
        pending = (
            conn.execute(
                select(e).where(e.c.monitor == monitor, e.c.alerts_done.is_(False)).order_by(e.c.opened_at)
            )
            .mappings()
            .all()
        )
    outcomes: list[dict[str, Any]] = []
    for episode in pending:
        transitions = ["open"] + (["close"] if episode["closed_at"] is not None else [])
        complete = True
        for transition in transitions:
            if transition not in config.monitor.alert_on:
                continue
            sent, done = _send(engine, config, dict(episode), transition)
            outcomes += sent
            complete &= done
        if complete:
            with write_transaction(engine) as conn:
                conn.execute(
                    update(e).where(e.c.episode_id == episode["episode_id"]).values(alerts_done=True)
                )
    return outcomes


def _send(
    engine: Engine,
    config: MonitorConfig,
    episode: dict[str, Any],
    transition: str,
) -> tuple[list[dict[str, Any]], bool]:
    monitor, a = config.monitor.name, alerts_table
    key = dedupe_key(monitor, episode["episode_id"], transition)
    with engine.connect() as conn:
        delivered = {
            row[0]
            for row in conn.execute(
                select(a.c.channel).where(a.c.monitor == monitor, a.c.dedupe_key == key, a.c.ok.is_(True))
            ).all()
        }
    channels = [ch for ch in config.alerts.channels if channel_label(ch) not in delivered]
    if not channels:
        return [], True
    decision = DECISIONS[transition]
    settings = config.alerts.model_copy(update={"channels": channels, "notify_on": [decision]})
    out = alerts.deliver(decision, message(config, episode, transition), settings, dedupe_key=key)
    _record(engine, monitor, key, episode["episode_id"], transition, out)
    for outcome in out:
        if not outcome.get("ok"):
            _log.warning(
                "monitor alert %s to %s failed: %s", key, outcome.get("channel"), outcome.get("error")
            )
    return out, all(o.get("ok") for o in out)


def _record(
    engine: Engine, monitor: str, key: str, episode_id: str, transition: str, outcomes: list[dict[str, Any]]
) -> None:
    a = alerts_table
    with write_transaction(engine) as conn:
        for outcome in outcomes:
            where = and_(a.c.monitor == monitor, a.c.dedupe_key == key, a.c.channel == outcome["channel"])
            sent_at = datetime.fromisoformat(outcome["sent_at"]) if outcome.get("sent_at") else None
            values = {
                "ok": bool(outcome.get("ok")),
                "error": outcome.get("error"),
                "sent_at": sent_at,
                "episode_id": episode_id,
                "transition": transition,
            }
            row = conn.execute(select(a.c.attempts).where(where)).first()
            if row is None:
                conn.execute(
                    insert(a).values(
                        monitor=monitor,
                        dedupe_key=key,
                        channel=outcome["channel"],
                        attempts=int(outcome.get("attempts") or 0),
                        **values,
                    )
                )
            else:
                conn.execute(
                    update(a)
                    .where(where)
                    .values(attempts=row[0] + int(outcome.get("attempts") or 0), **values)
                )


def message(config: MonitorConfig, episode: dict[str, Any], transition: str) -> dict[str, Any]:
    """The alert summary for :func:`labelgate.pipeline.alerts.deliver`: what changed, since when, worst raters."""
    from labelgate.monitor.sources import utc

    question, metric = episode["question"], episode["metric"]
    details = episode.get("details") or {}
    window = details.get("closed_by" if transition == "close" else "opened_by") or {}
    since = utc(episode["opened_at"])
    lines = []
    if transition == "open":
        lines.append(f"[{question}] {metric} drift ({episode['kind']}): {episode['reason']}")
        lines.append(f"since {since} (window {window.get('window_start')} – {window.get('window_end')})")
    else:
        lines.append(f"[{question}] {metric} drift episode closed: {episode.get('close_reason')}")
        lines.append(f"opened {since}, closed {utc(episode['closed_at'])}")
    if episode.get("worst_raters"):
        lines.append("worst raters at opening: " + ", ".join(map(str, episode["worst_raters"])))
    lines.append(f"episode {episode['episode_id']} ({episode['kind']})")
    return {
        "batch_id": f"monitor {config.monitor.name} / {question} / {metric}",
        "run_id": episode["episode_id"],
        "reasons": lines,
        "headline": {
            f"{question}/{metric}": {
                "value": window.get("value"),
                "ci_low": window.get("ci_low"),
                "ci_high": window.get("ci_high"),
            },
        },
        "reports": {},
    }
