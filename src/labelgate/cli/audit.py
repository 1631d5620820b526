"""``labelgate runs`` (the audit log of gate decisions) and ``labelgate alerts retry`` (alerts still owed).

The main application adds them with ``register(app)``. Exit codes: 0 success, 3 error.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from labelgate.cli._group import LabelGateGroup
from labelgate.cli._output import fail, safe

DECISIONS = ("ACCEPT", "REJECT", "REVIEW", "ERROR")


def register(app: typer.Typer) -> None:
    """Add ``runs`` and the ``alerts`` group (``alerts retry``) to a Typer application."""
    app.command("runs")(runs_command)
    alerts_app = typer.Typer(cls=LabelGateGroup, rich_markup_mode=None, help="Alerts of gate decisions.",
                             no_args_is_help=True)
    alerts_app.command("retry")(retry_command)
    app.add_typer(alerts_app, name="alerts")


def runs_command(
    config: Annotated[Path, typer.Option("--config", help="Gate configuration (YAML): its results store is read.")],
    batch: Annotated[str | None, typer.Option("--batch", help="Only the records of this batch id.")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Only records created at or after this ISO time.")]
    = None,
    decision: Annotated[str | None, typer.Option("--decision", help="Only records with this decision.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many (newest first).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the records as one JSON list.")] = False,
) -> None:
    """List the audit log, newest first: every gate request with its decision (the latest per batch is current)."""
    from labelgate.gate.audit import runs

    if decision is not None and decision.upper() not in DECISIONS:
        raise fail(ValueError(f"--decision must be one of {', '.join(DECISIONS)}; got {decision!r}."),
                   "for example: labelgate runs --config gate.yaml --decision REJECT")
    try:
        records = runs(str(config), batch_id=batch, since=since, decision=decision and decision.upper(),
                       limit=limit)
    except Exception as exc:
        raise fail(exc, "check the configuration's store (url or url_env) and the --since time") from None
    if as_json:
        typer.echo(json.dumps(records, default=str))
        return
    typer.echo(runs_text(records))


def runs_text(records: list[dict[str, Any]]) -> str:
    """One line per record: time, decision, batch id, run id, and where a reused decision came from."""
    if not records:
        return "no gate runs recorded"
    current: set[str] = set()
    lines = []
    for record in records:  # newest first: the first line of a batch id is its current decision
        mark = "*" if record["batch_id"] not in current else " "
        current.add(record["batch_id"])
        reused = f"  (decision of run {record['reused_from']})" if record.get("reused_from") else ""
        reason = f"  {safe(record['reasons'][0])}" if record.get("reasons") else ""
        lines.append(f"{mark} {str(record['created_at'])[:19]}  {record['decision']:<6}  {safe(record['batch_id'])}"
                     f"  {record['run_id']}{reused}{reason}")
    lines.append("* = the batch's current decision")
    return "\n".join(lines)


def retry_command(
    config: Annotated[Path, typer.Option("--config", help="Gate configuration (YAML): its store and alert channels.")],
    batch: Annotated[str | None, typer.Option("--batch", help="Only the current decision of this batch id.")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Only batches decided at or after this ISO time.")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print run id → outcomes as JSON.")] = False,
) -> None:
    """Send every alert still owed for the current decision of each batch, and every ``labelgate.gate.decided`` event
    still owed to the Prefect API (none is sent twice)."""
    from labelgate.gate.alerting import EVENT_CHANNEL, retry_alerts
    from labelgate.gate.audit import as_config
    from labelgate.pipeline.store import ResultsStore

    try:
        cfg = as_config(str(config))
        when = datetime.fromisoformat(since) if since else None
        store = ResultsStore.from_config(cfg.store)
        sent = retry_alerts(store, cfg, batch_id=batch, since=when)
        events = _retry_events(store, batch, when)
    except Exception as exc:
        raise fail(exc, "check the configuration's store, its alert channels and the --since time") from None
    for run_id, ok in events.items():
        outcome = {"channel": EVENT_CHANNEL, "ok": ok, "error": None if ok else "the Prefect API did not take it"}
        sent.setdefault(run_id, []).append(outcome)
    if as_json:
        typer.echo(json.dumps(sent, default=str))
        return
    if not sent:
        typer.echo("no alert was owed, no event was owed")
    for run_id, outcomes in sent.items():
        for outcome in outcomes:
            state = "sent" if outcome.get("ok") else f"failed: {safe(outcome.get('error'))}"
            typer.echo(f"run {run_id}  {outcome.get('channel')}  {state}")


def _retry_events(store: Any, batch: str | None, since: datetime | None) -> dict[str, bool]:
    """The owed decided events sent again, when a Prefect API is configured (else they stay owed)."""
    from labelgate.extras import missing_modules

    if missing_modules("prefect"):
        return {}
    from prefect.settings import get_current_settings

    if not get_current_settings().api.url:
        return {}
    from labelgate.flows.gate import send_decided_event
    from labelgate.gate.alerting import retry_events

    return retry_events(store, send_decided_event, batch_id=batch, since=since)
