"""Episode alerts: one when a drift episode opens, one when it closes, through the gate's channels, never twice.

An episode is a question's drift incident (:mod:`labelgate.monitor.episodes`): alarms of other series or rules that
join it while it is open send nothing more; its alert lists every alarm stored when it is sent.

Each transition has a dedupe key ``labelgate-monitor:<monitor>:<episode_id>:<open|close>`` (episode ids are
deterministic, see :func:`labelgate.monitor.drift.episode_id`) and goes through the alert ledger that the gate
uses too (:func:`labelgate.pipeline.alert_ledger.deliver_once`): a channel that already received the transition
is skipped, so a rerun of the monitor over the same windows (or a replay) sends nothing again, and a channel that
failed is tried again at the next pass. Alerts are sent with the decision ``DRIFT_OPEN`` / ``DRIFT_CLOSED`` after
the pass's transaction commits, so an alert is only sent for a stored episode.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select, update

from labelgate.monitor.episodes import members
from labelgate.pipeline.alert_ledger import deliver_once
from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.database import MONITOR_PASS_LOCK, transaction
from labelgate.pipeline.serialize import utc
from labelgate.pipeline.tables import episodes_table

DECISIONS = {"open": "DRIFT_OPEN", "close": "DRIFT_CLOSED"}


def dedupe_key(monitor: str, episode_id: str, transition: str) -> str:
    """The dedupe key of one transition of one episode."""
    return f"labelgate-monitor:{monitor}:{episode_id}:{transition}"


def send_pending(engine: Engine, config: MonitorConfig) -> list[dict[str, Any]]:
    """Send every episode transition not yet delivered to every channel; returns the new outcomes."""
    monitor = config.monitor.name
    e = episodes_table
    with transaction(engine) as conn:
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
            key = dedupe_key(monitor, episode["episode_id"], transition)
            sent, done = deliver_once(
                engine, DECISIONS[transition], message(config, dict(episode), transition), config.alerts, key
            )
            outcomes += sent
            complete &= done
        if complete:
            with transaction(engine, write=True, lock=MONITOR_PASS_LOCK) as conn:
                conn.execute(
                    update(e).where(e.c.episode_id == episode["episode_id"]).values(alerts_done=True)
                )
    return outcomes


def message(config: MonitorConfig, episode: dict[str, Any], transition: str) -> dict[str, Any]:
    """The alert summary for :func:`labelgate.pipeline.alerts.deliver`: which series fell under which rule, with
    their numbers and since when, the worst raters; on closing, how each recovered."""
    question = episode["question"]
    alarms = members(episode)
    since = utc(episode["opened_at"])
    series = ", ".join(dict.fromkeys(f"{m['metric']} ({m['kind']})" for m in alarms))
    lines = []
    if transition == "open":
        lines.append(f"[{question}] drift episode opened: {series}, since {since}")
        for m in alarms:
            window = m.get("opened_by") or {}
            lines.append(f"{m['metric']} ({m['kind']}) since {utc(m['since'])}: {m['reason']} "
                         f"(window {window.get('window_start')} – {window.get('window_end')})")
    else:
        lines.append(f"[{question}] drift episode closed: every alarm recovered ({series})")
        lines.append(f"opened {since}, closed {utc(episode['closed_at'])}")
        lines += [f"{m['metric']} ({m['kind']}) recovered {utc(m['closed_at'])}: {m['close_reason']}" for m in alarms]
    if episode.get("worst_raters"):
        lines.append("worst raters at opening: " + ", ".join(map(str, episode["worst_raters"])))
    lines.append(f"episode {episode['episode_id']}")
    headline: dict[str, dict[str, Any]] = {}
    for m in alarms:
        window = m.get("closed_by" if transition == "close" else "opened_by") or {}
        headline.setdefault(f"{question}/{m['metric']}", {
            "value": window.get("value"), "ci_low": window.get("ci_low"), "ci_high": window.get("ci_high"),
        })
    return {
        "batch_id": f"monitor {config.monitor.name} / {question}",
        "run_id": episode["episode_id"],
        "reasons": lines,
        "headline": headline,
        "reports": {},
    }
