"""``labelgate monitor`` (one pass by hand) and ``labelgate history`` (the stored series).

The main application adds them with ``register(app)``. Exit codes: 0 success, 3 error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from labelgate.cli._group import PREFECT_HELP, PrefectMode
from labelgate.cli._output import fail, num, orchestration_text, safe


def register(app: typer.Typer) -> None:
    """Add the ``monitor`` and ``history`` commands to a Typer application."""
    app.command("monitor")(monitor_command)
    app.command("history")(history_command)


def monitor_command(
    config: Annotated[Path, typer.Option("--config", help="Monitor configuration (YAML).")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the pass summary as one JSON object.")
    ] = False,
    prefect: Annotated[PrefectMode, typer.Option("--prefect", help=PREFECT_HELP)] = PrefectMode.auto,
    no_prefect: Annotated[
        bool, typer.Option("--no-prefect", hidden=True, help="The same as --prefect never (kept for scripts).")
    ] = False,
    replay: Annotated[
        bool,
        typer.Option(
            "--replay", help="Measure every window again from the stored judgements (sends no alert twice)."
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Run no pass: say, from the stored windows, whether each gate and detector tells drift from noise.",
        ),
    ] = False,
) -> None:
    """Run one monitor pass: merge new deliveries, measure closed windows, detect drift, alert."""
    if check:
        from labelgate.monitor.preflight import check as check_config

        try:
            findings = check_config(str(config))
        except Exception as exc:
            raise fail(exc, "check the configuration (store, monitor.name)") from None
        if as_json:
            typer.echo(json.dumps(findings, default=str))
        else:
            for finding in findings:
                typer.echo(("warning: " if finding["warn"] else "") + safe(finding["message"]))
        return
    if no_prefect and prefect is PrefectMode.always:
        raise typer.BadParameter("--no-prefect is --prefect never: it contradicts --prefect always",
                                 param_hint="'--no-prefect'")
    mode = PrefectMode.never if no_prefect else prefect
    try:
        summary = _run_pass(config, mode.value, replay)
    except typer.Exit:
        raise
    except Exception as exc:
        raise fail(exc, "check the configuration (monitor.source, store) and that the drop folder exists") from None
    typer.echo(json.dumps(summary, default=str) if as_json else pass_text(summary))


def _run_pass(config: Path, prefect: str, replay: bool) -> dict[str, Any]:
    """One pass in this process or as the monitor flow (:func:`labelgate.flows.api.choose`); the summary says which
    (``orchestration``)."""
    from labelgate.extras import require

    require("gate", "labelgate monitor")
    from labelgate.flows.api import choose
    from labelgate.pipeline.config import as_monitor_config
    from labelgate.pipeline.preflight import check_extras

    cfg = as_monitor_config(str(config))
    check_paths(cfg, config)  # the files the pass reads, named by their keys, before the store or Prefect
    check_extras(cfg)  # alert channels, dask, Label Studio: their extras, before the pass

    how = choose(prefect, feature="labelgate monitor")
    if how.mode == "in-process":
        from labelgate.monitor.engine import run_pass

        summary = run_pass(str(config), replay=replay)
    else:
        from labelgate.flows.api import require_api
        from labelgate.flows.monitor import monitor_flow

        try:
            require_api("the pass did not run")
        except Exception as exc:
            raise fail(exc, "check PREFECT_API_URL and that the Prefect server runs, or run the pass without "
                            "Prefect: --prefect never") from None
        summary = monitor_flow(str(config), replay=replay)
    summary.setdefault("orchestration", how.to_dict())
    return summary


def check_paths(cfg: Any, config: Path) -> None:
    """Exit 3 with the key to fix when the trusted replication file or the drop folder (or Parquet dataset) the
    configuration names does not exist; paths with a URL scheme are left to their source."""
    from labelgate.errors import InputError, Reason

    source = cfg.monitor.source
    wanted = [("trusted.path", cfg.trusted.path, "trusted replication file")]
    if source.kind in ("files", "parquet"):
        wanted.append(("monitor.source.path", source.path,
                       "drop folder" if source.kind == "files" else "Parquet dataset"))
    for key, path, what in wanted:
        if not path or "://" in path or Path(path).exists():
            continue
        hint = f"set {key} in {config} (a relative path resolves against the file's folder)"
        if "labelgate-demo" in Path(path).parts:
            hint += "; for the quick start, first run `labelgate synth --scenario drift --out labelgate-demo/monitor`"
            if key == "monitor.source.path":
                hint += f" and `mkdir -p {_shown(path)}`"
        elif key == "monitor.source.path" and source.kind == "files":
            hint += f", or create the folder: mkdir -p {_shown(path)}"
        problem = f"{config}: {key}: the {what} {os.path.normpath(path)!r} does not exist."
        raise fail(InputError(problem, Reason.UNREADABLE_INPUT, file=path, key=key), hint)


def _shown(path: str) -> str:
    """A path as short as it can be said: relative to the working directory when under it."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path


def history_command(
    config: Annotated[Path, typer.Option("--config", help="Monitor configuration (YAML).")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print windows, episodes and raters as JSON.")
    ] = False,
    since: Annotated[str | None, typer.Option(help="Only windows ending after this time (ISO 8601).")] = None,
    question: Annotated[str | None, typer.Option(help="Only this question.")] = None,
    metric: Annotated[str | None, typer.Option(help="Only this metric.")] = None,
) -> None:
    """Print the stored agreement series (window and cumulative), the drift episodes and flagged raters."""
    from labelgate.monitor.history import history

    try:
        out = history(str(config), since=since)
    except Exception as exc:
        raise fail(exc, "check --config and --since (e.g. 2026-01-05T00:00:00Z)") from None
    keep = _filter(question, metric)
    out = {
        "windows": [w for w in out["windows"] if keep(w)],
        "episodes": [e for e in out["episodes"] if keep(e)],
        "raters": [r for r in out["raters"] if question is None or r.get("question") == question],
    }
    typer.echo(json.dumps(out, default=str) if as_json else history_text(out))


def _filter(question: str | None, metric: str | None) -> Any:
    return lambda row: (
        (question is None or row["question"] == question) and (metric is None or row["metric"] == metric)
    )


def pass_text(summary: dict[str, Any]) -> str:
    """A readable summary of one pass."""
    invalid = f", {summary['n_invalid']} invalid row(s) not merged" if summary.get("n_invalid") else ""
    lines = [
        f"monitor {summary.get('monitor')}: pass {summary.get('pass_id')}  {summary.get('n_new')} new "
        f"judgement(s){invalid}"
    ]
    if how := orchestration_text(summary.get("orchestration")):
        lines.append(f"  ran: {how}")
    for d in summary.get("deliveries") or []:
        lines.append(
            f"  delivery {d['delivery_id']}: {d['status']}, {d['n_new']} new, {d['n_already']} already "
            f"merged, {d['n_conflicts']} conflicting, {d['n_invalid']} invalid"
        )
    for question, q in (summary.get("questions") or {}).items():
        lines.append(f"  [{question}] {q.get('windows', 0)} window(s) closed")
        for metric, row in (q.get("cumulative") or {}).items():
            threshold = f"  threshold {num(row['threshold'])}" if row.get("threshold") is not None else ""
            lines.append(
                f"    {metric:<24} {num(row['value'])}  [{num(row['ci_low'])}, {num(row['ci_high'])}]"
                f"  n_items={row['n_items']}{threshold}"
            )
        for note in q.get("learning") or []:
            lines.append(f"    note: {note['message']}")
        for event in q.get("events") or []:
            lines.append(
                f"    episode {event['transition']}: {event['metric']} ({event['kind']}) since "
                f"{event['since']}: {event['reason']} [episode {event['episode_id'][:12]}]"
            )
    for outcome in summary.get("alerts") or []:
        lines.append(
            f"  alert {outcome.get('decision')} via {outcome.get('channel')}: "
            f"{'sent' if outcome.get('ok') else outcome.get('error')}"
        )
    return "\n".join(lines)


def history_text(out: dict[str, Any]) -> str:
    """The series as a table, then the episodes and the flagged raters."""
    lines = [
        f"{'question':<12} {'metric':<24} {'scope':<10} {'window end':<25} {'value':>7} {'ci_low':>7} "
        f"{'ci_high':>7} {'items':>6} {'threshold':>9}"
    ]
    for w in out["windows"]:
        lines.append(
            f"{w['question']:<12} {w['metric']:<24} {w['scope']:<10} {w['window_end']:<25} "
            f"{num(w['value']):>7} {num(w['ci_low']):>7} {num(w['ci_high']):>7} {w['n_items']:>6} "
            f"{num(w['threshold']):>9}"
        )
    from labelgate.reporting.values import count_windows

    n_cumulative = sum(1 for w in out["windows"] if w["scope"] == "cumulative")
    lines.append(f"{count_windows(out['windows'])} window(s); {n_cumulative} cumulative row(s), from the passes that "
                 "merged crowd judgements")
    for e in out["episodes"]:
        state = f"closed {e['closed_at']}" if e["closed_at"] else "OPEN"
        alarms = e.get("alarms") or [{"metric": e["metric"], "kind": e["kind"], "since": e["opened_at"],
                                      "reason": e["reason"], "recovered_at": e["closed_at"]}]
        lines.append(f"episode {e['episode_id'][:12]} [{e['question']}] opened {e['opened_at']}, {state}: "
                     f"{len(alarms)} alarm(s)")
        for a in alarms:
            recovered = f", recovered {a['recovered_at']}" if a.get("recovered_at") else ""
            lines.append(f"  {a['metric']} ({a['kind']}) since {a['since']}{recovered}: {a['reason']}")
    flagged = [r for r in out["raters"] if r.get("flags")]
    for r in flagged:
        partners = f" with {', '.join(map(str, r['partners']))}" if r.get("partners") else ""
        lines.append(
            f"rater {r['rater_id']} ({r['pool']}, {r.get('question')}): {', '.join(r['flags'])}{partners}"
            f"  kappa_vs_trusted {num(r['kappa_vs_trusted'])}  loo {num(r['loo_agreement'])}"
        )
    from labelgate.metrics.diagnostics import judgement_summary, too_few_text

    families: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in out["raters"]:
        families.setdefault((str(r.get("question")), str(r.get("pool"))), []).append(r)
    for (question, pool), rows in families.items():
        if text := too_few_text(judgement_summary(rows)):
            lines.append(f"raters [{question}] {pool}: {text}")
    return "\n".join(lines)
