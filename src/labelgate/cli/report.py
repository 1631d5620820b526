"""The ``labelgate report`` command: one HTML monitoring report from a configuration's results store.

``labelgate report --config gate.yaml [--since 7d] [--out report.html]`` reads the gate runs of the results
store named by the configuration (and the monitor's windows and drift episodes when the monitor has run
on that store), and writes :func:`labelgate.reporting.report.render_monitor_report` to one self-contained file.
:func:`register` adds the command to the ``labelgate`` Typer app.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from labelgate.errors import ParameterError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_ERROR_EXIT = 3


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """The start of the reported period: an ISO 8601 date/time (UTC if naive) or a duration back from now.

    Examples
    --------
    >>> now = datetime(2024, 5, 10, 12, tzinfo=UTC)
    >>> parse_since("7d", now).isoformat(), parse_since("2024-05-01").isoformat()
    ('2024-05-03T12:00:00+00:00', '2024-05-01T00:00:00+00:00')
    >>> parse_since(None) is None
    True
    >>> parse_since("last week")
    Traceback (most recent call last):
    ...
    labelgate.errors.ParameterError: The '--since' option must be an ISO 8601 date or date-time ...
    """
    if text is None or not text.strip():
        return None
    match = _DURATION.match(text)
    if match:
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ParameterError("The '--since' option must be an ISO 8601 date or date-time (2024-05-01, "
                             "2024-05-01T12:00+02:00) or a duration back from now (30m, 24h, 7d, 2w); "
                             f"got {text!r}.", parameter="since", value=text) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def load_any_config(path: str | Path) -> Any:
    """A monitor configuration when the file has a ``monitor`` section, else a gate configuration (both through the
    one loader: size bounded, YAML aliases refused, errors naming the file and the key)."""
    from labelgate.pipeline.config import load_config, load_monitor_config
    from labelgate.pipeline.config.loading import read_yaml

    try:
        data = read_yaml(Path(path))
    except Exception:
        data = None  # load_config reports the problem with the file name
    if isinstance(data, Mapping) and "monitor" in data:
        return load_monitor_config(path)
    return load_config(path)


def build_view(config: Any, since: datetime | None, limit: int = 1000) -> dict[str, Any]:
    """Everything the monitoring report shows: runs since ``since``, monitor windows and episodes.

    Without monitor data the windows are built from the gate runs (one window per run).
    """
    from labelgate.pipeline.store import ResultsStore
    from labelgate.reporting.report import history_from_runs

    store = ResultsStore.from_config(config.store)
    runs = [record.to_dict() for record in store.list_runs(limit)]
    runs = [r for r in runs if since is None or _after(r.get("created_at"), since)]
    notes: list[str] = []
    if len(runs) == limit:
        notes.append(f"Only the {limit} most recent gate runs are shown (--limit).")
    history, source = monitor_history(config, since, notes)
    if history is None:
        history, source = history_from_runs(runs), "the gate runs (one window per gated batch)"
    return {"runs": runs, "windows": history.get("windows") or [], "episodes": history.get("episodes") or [],
            "raters": _raters_by_question(history.get("raters")), "since": since.isoformat() if since else None,
            "generated_at": datetime.now(UTC).isoformat(), "source": source, "notes": notes}


def monitor_history(config: Any, since: datetime | None,
                    notes: list[str]) -> tuple[Mapping[str, Any] | None, str | None]:
    """Windows and episodes from ``labelgate.monitor.history(config, since=...)`` when available.

    The one integration point with the monitor (issue 6): it must return ``{"windows": [...],
    "episodes": [...]}`` (optionally ``"raters": {question: [per-rater row...]}``) or a list of window rows.
    """
    try:
        monitor = importlib.import_module("labelgate.monitor")
    except ImportError:
        return None, None
    history = getattr(monitor, "history", None)
    if history is None or not hasattr(config, "monitor"):
        return None, None
    try:
        data = history(config, since=since)
    except Exception as exc:  # the gate runs still make a useful report
        notes.append(f"The monitor history could not be read ({type(exc).__name__}: {exc}); the windows "
                     "below come from the gate runs.")
        return None, None
    if isinstance(data, list):
        data = {"windows": data, "episodes": []}
    windows = data.get("windows") or []
    return (data, f"the monitor '{config.monitor.name}'") if windows else (None, None)


def _after(stamp: Any, since: datetime) -> bool:
    try:
        moment = datetime.fromisoformat(str(stamp))
    except ValueError:
        return True  # an unreadable timestamp is shown rather than silently dropped
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)) >= since


def default_output(config: Any) -> Path:
    """``<reports.dir>/monitor-report.html`` (overwritten by each call, so links to it stay valid)."""
    return Path(config.reports.dir) / "monitor-report.html"


def report(
    config: Annotated[Path, typer.Option("--config", help="Gate or monitor configuration (YAML).")],
    since: Annotated[str | None, typer.Option(
        "--since", help="Start of the period: ISO date/time (2024-05-01) or a duration (24h, 7d).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="HTML file to write (default: <reports.dir>/monitor-report.html).")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Most recent gate runs to read.")] = 1000,
) -> None:
    """Write the monitoring report: gate runs, agreement over time per question, drift episodes."""
    from labelgate.reporting.report import write_monitor_report
    from labelgate.reporting.values import count_windows

    try:
        start = parse_since(since)
        cfg = load_any_config(config)
        view = build_view(cfg, start, limit)
        path = write_monitor_report(view, out or default_output(cfg))
    except Exception as exc:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        typer.echo(f"error: {message.strip().splitlines()[0]}", err=True)
        typer.echo("hint: check --config (the YAML of `labelgate gate`), its store URL and --since", err=True)
        raise typer.Exit(_ERROR_EXIT) from None
    open_episodes = sum(1 for e in view["episodes"] if not e.get("closed_at"))
    period = f" since {view['since']}" if view["since"] else ""
    typer.echo(f"{len(view['runs'])} gate run(s), {count_windows(view['windows'])} window(s), "
               f"{len(view['episodes'])} drift episode(s) ({open_episodes} open){period}")
    typer.echo(f"report: {os.path.normpath(path)}")


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to ``app``."""
    app.command("report")(report)


def _raters_by_question(raters: Any) -> dict[str, list[dict[str, Any]]]:
    """The monitor's per-rater rows (a list, each with its ``question``) grouped by question."""
    if isinstance(raters, dict):
        return raters
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in raters or []:
        grouped.setdefault(str(row.get("question")), []).append(row)
    return grouped
