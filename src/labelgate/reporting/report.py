"""Self-contained HTML reports: the gate report of one run and the monitoring report over many runs.

One file each, readable offline: Jinja2 templates (``reporting/templates/``, autoescaped), inline CSS, inline
SVG figures drawn by matplotlib when the ``report`` extra is installed (:mod:`labelgate.reporting.plots`), no
script, no external resource, and a Content-Security-Policy that blocks any load. Everything is rendered from
plain dicts, so a report can be rebuilt later from the stored ``result.json`` or from the results store:

- the gate run *summary* (what :func:`labelgate.flows.gate.gate_flow` returns and stores);
- the monitoring *history* ``{"windows": [window row...], "episodes": [episode row...]}`` (the data
  contract of ``labelgate.monitor``; see ``docs/reports.md``).

Parts whose data is absent (per-rater diagnostics, the disattenuated correlation, the ratings-per-item
histogram, the monitoring series) are replaced by a short "not computed" note. Without matplotlib the report
keeps every table and says once how to get the figures. Every string coming from the data or the
configuration (batch and run ids, question names, rater ids, labels, reasons, paths) is escaped, in the page
and in the SVG; links are only made for ``file``, ``http`` and ``https`` targets.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labelgate.reporting.values import finite, mapping

if TYPE_CHECKING:
    import jinja2

__all__ = ["history_from_runs", "render_gate_report", "render_monitor_report", "write_gate_report",
           "write_monitor_report"]

#: Metrics followed over time when windows are built from gate runs.
_MONITORED = ("normalized_cross_kappa", "cross_kappa", "irr_crowd", "irr_trusted",
              "disattenuated_correlation", "spa", "labeler_icc")
_PRETTY_JSON_UP_TO = 1_000_000


@functools.cache
def _environment() -> jinja2.Environment:
    """The template environment: package templates, autoescape everywhere, undefined names are errors."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("labelgate.reporting", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, bytecode_cache=_bytecode_cache())
    env.filters["t"] = lambda value: "" if value is None else value
    return env


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Jinja2's cache of compiled templates, so that a fresh process does not compile them again.

    Compiling the report templates costs a fresh ``labelgate gate`` about 0.1 s. Jinja2 keeps the compiled code in a
    directory of the user's own (``_jinja2-cache-<uid>`` in the temporary folder, mode 0700, its owner checked), keyed
    by each template's source checksum, so an edited template is compiled anew. The cache is best effort: where
    its directory cannot be made safely, or a cached file cannot be read or written, the template is compiled as
    if there were no cache — a report never fails because of it.
    """
    import jinja2

    class BestEffort(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().load_bytecode(bucket)
            except OSError:
                bucket.reset()

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:
                pass  # the next process compiles the template again

    try:
        return BestEffort()
    except (OSError, RuntimeError):
        return None


def _render(template: str, context: Mapping[str, Any]) -> str:
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return _environment().get_template(template).render(**context, generated=generated)


def render_gate_report(summary: Mapping[str, Any], history: Mapping[str, Any] | None = None) -> str:
    """The HTML gate report of one run.

    Parameters
    ----------
    summary : mapping
        The gate run summary: ``decision``, ``batch_id``, ``run_id``, ``reasons``, ``warnings``, ``coverage``,
        ``metrics`` (question → metric → row), ``validation``, ``reports``, optional ``diagnostics``
        (question → ``{"raters": [...], "design": {...}}``) and ``monitoring`` (a history, see below).
    history : mapping, optional
        Monitoring history ``{"windows": [...], "episodes": [...]}``; defaults to ``summary["monitoring"]``.

    Returns
    -------
    str
        A complete HTML document (UTF-8, no external resource).

    Examples
    --------
    >>> page = render_gate_report({"decision": "REJECT", "batch_id": "<b>", "reasons": ["a & b"],
    ...                            "metrics": {}})
    >>> "&lt;b&gt;" in page and "a &amp; b" in page and "<b>" not in page.split("<body>")[1]
    True
    """
    from labelgate.reporting.gate_page import gate_context

    history = history if history is not None else summary.get("monitoring")
    return _render("gate.html.j2", gate_context(summary, history))


def write_gate_report(summary: Mapping[str, Any], directory: str | Path,
                      history: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Write ``report.html`` and ``result.json`` (the summary, re-renderable) into ``directory``.

    ``result.json`` is indented when it is small (under 1 MB compact), compact otherwise.

    Returns
    -------
    dict
        ``{"html": path, "json": path}``.

    Examples
    --------
    >>> import tempfile
    >>> paths = write_gate_report({"decision": "ACCEPT", "batch_id": "b1", "metrics": {}}, tempfile.mkdtemp())
    >>> sorted(paths), json.loads(Path(paths["json"]).read_text())["reports"]["html"] == paths["html"]
    (['html', 'json'], True)
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    page, data = directory / "report.html", directory / "result.json"
    paths = {"html": str(page), "json": str(data)}
    # the stored copy knows where its report is, so a re-render links back to both files
    stored = {**summary, "reports": {**mapping(summary.get("reports")), **paths}}
    page.write_text(render_gate_report(stored, history), encoding="utf-8")
    text = json.dumps(stored, separators=(",", ":"), default=str, allow_nan=False)
    if len(text) < _PRETTY_JSON_UP_TO:  # indented for people; large summaries stay compact (size, time)
        text = json.dumps(stored, indent=2, default=str, allow_nan=False)
    data.write_text(text, encoding="utf-8")
    return paths


def render_monitor_report(view: Mapping[str, Any]) -> str:
    """The HTML monitoring report: gate runs, agreement over time per question, drift episodes.

    Parameters
    ----------
    view : mapping
        ``windows`` (monitor window rows), ``episodes`` (drift episodes), ``runs`` (gate run summaries,
        newest first), optional ``raters`` (question → per-rater rows of the monitor), ``since`` and
        ``generated_at`` (ISO 8601 or None), ``source`` (where the windows come from, shown in the header)
        and ``notes`` (strings shown under the header).

    Examples
    --------
    >>> page = render_monitor_report({"windows": [], "episodes": [], "runs": []})
    >>> "No monitoring window" in page
    True
    """
    from labelgate.reporting.monitor_page import monitor_context

    return _render("monitor.html.j2", monitor_context(view))


def write_monitor_report(view: Mapping[str, Any], path: str | Path) -> str:
    """Write the monitoring report to ``path`` (folders are created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_monitor_report(view), encoding="utf-8")
    return str(path)


def history_from_runs(runs: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Monitoring windows built from gate runs: one window per run, question and metric with an interval.

    Used when no monitor history is available: each gated batch is a window whose start and end are the
    run's ``created_at`` and ``finished_at``; ``threshold`` is the gate's ``min_value`` when it has one.
    Only the followed metrics are kept (``irr_baseline``, ``difference`` and ``ratio`` repeat the IRRs).

    Examples
    --------
    >>> run = {"created_at": "2024-01-01T00:00:00+00:00", "decision": "ACCEPT", "batch_id": "b",
    ...        "metrics": {"q": {"cross_kappa": {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6,
    ...                                          "thresholds": {"min_value": 0.2}}}}}
    >>> rows = history_from_runs([run])["windows"]
    >>> rows[0]["metric"], rows[0]["threshold"], rows[0]["scope"]
    ('cross_kappa', 0.2, 'window')
    """
    windows = []
    for run in runs:
        if run.get("decision") == "ERROR" or not run.get("created_at"):
            continue
        for question, rows in mapping(run.get("metrics")).items():
            for metric, row in mapping(rows).items():
                row = mapping(row)
                if metric not in _MONITORED or not finite(row.get("value")):
                    continue
                windows.append({
                    "question": question, "metric": metric, "window_start": run["created_at"],
                    "window_end": run.get("finished_at") or run["created_at"], "scope": "window",
                    "value": row.get("value"), "ci_low": row.get("ci_low"), "ci_high": row.get("ci_high"),
                    "n_items": row.get("n_items"), "n_ratings": None,
                    "threshold": mapping(row.get("thresholds")).get("min_value"),
                    "batch_id": run.get("batch_id")})
    return {"windows": windows, "episodes": []}
