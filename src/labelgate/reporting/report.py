"""Self-contained HTML reports: the gate report of one run and the monitoring report over many runs.

One file each, readable offline: inline CSS, inline SVG charts (:mod:`labelgate.reporting.plots`), no script, no
external resource. Everything is rendered from plain dicts, so a report can be rebuilt later from the stored
``result.json`` or from the results store:

- the gate run *summary* (what :func:`labelgate.flows.gate.gate_flow` returns and stores);
- the monitoring *history* ``{"windows": [window row...], "episodes": [episode row...]}`` (the data
  contract of ``labelgate.monitor``; see ``docs/reports.md``).

Parts whose data is absent (per-rater diagnostics, the disattenuated correlation, the ratings-per-item
histogram, the monitoring series) are replaced by a short "not computed" note. Every string coming from the
data or the configuration (batch and run ids, question names, rater ids, labels, reasons, paths) is
HTML-escaped, in the page and in the SVG; links are only made for ``file``, ``http`` and ``https`` targets.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from labelgate.reporting import plots
from labelgate.reporting.plots import IntervalRow, Point, Series, Span, TimePoint, escape, finite, fmt

__all__ = ["history_from_runs", "render_gate_report", "render_monitor_report", "write_gate_report",
           "write_monitor_report"]

_e = escape
_DECISION_COLOURS = {"ACCEPT": "#1a7f37", "REJECT": "#cf222e", "REVIEW": "#9a6700", "ERROR": "#6e7781"}
_VERDICTS = ("pass", "reject", "review")
#: Metrics of a question in display order; the others follow in their stored order.
_ORDER = ("normalized_cross_kappa", "cross_kappa", "irr_crowd", "irr_trusted", "irr_baseline", "difference",
          "ratio", "disattenuated_correlation", "spa", "labeler_icc")
_NAMES = {"normalized_cross_kappa": "normalized κx", "cross_kappa": "κx (cross-replication kappa)",
          "irr_crowd": "IRR of the crowd", "irr_trusted": "IRR of the trusted pool",
          "irr_baseline": "IRR at or above the trusted baseline", "difference": "IRR crowd − IRR trusted",
          "ratio": "IRR crowd / IRR trusted", "disattenuated_correlation": "disattenuated correlation ρxy",
          "spa": "SPA", "labeler_icc": "labeler ICC"}
#: Metrics followed over time when windows are built from gate runs.
_MONITORED = ("normalized_cross_kappa", "cross_kappa", "irr_crowd", "irr_trusted",
              "disattenuated_correlation", "spa", "labeler_icc")
#: Short names for legends.
_SHORT = {"irr_crowd": "IRR crowd", "irr_trusted": "IRR trusted", "cross_kappa": "κx",
          "normalized_cross_kappa": "normalized κx"}
_COVERAGE = {"batch_items": "items in the batch", "trusted_items": "items in the trusted replication",
             "common_items": "items in both",
             "coverage": "share of batch items also rated by the trusted pool"}
_RATER_TABLE_MAX = 100
_QUARANTINE_SAMPLE = 10
_OPEN_ALL_UP_TO = 6  # with more questions, only the failing ones start unfolded
_PRETTY_JSON_UP_TO = 1_000_000
_MARKERS_UP_TO = 200  # longer series are drawn as a line and band only (report size)

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;padding:1.5rem 2rem 4rem;
max-width:78rem;color:#1f2328;line-height:1.45}
h1{font-size:1.6rem;margin:.2rem 0}h2{margin-top:2.2rem;border-bottom:1px solid #d0d7de;padding-bottom:.3rem}
h3{margin:1.4rem 0 .4rem}h4{margin:1rem 0 .3rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.92rem}
td,th{border:1px solid #d0d7de;padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;color:#fff;padding:.15rem .75rem;border-radius:1rem;font-weight:600;
font-size:.95rem;vertical-align:middle}
.chip{display:inline-block;padding:0 .5rem;border-radius:.8rem;font-size:.82rem;border:1px solid currentColor;
margin-left:.4rem}
.pass{color:#1a7f37}.reject{color:#cf222e}.review{color:#9a6700}.none,.muted{color:#6e7781}
.meta{color:#57606a}.note{color:#57606a;font-style:italic}code{background:#f6f8fa;padding:0 .2rem;
border-radius:3px;word-break:break-all}
nav{margin:.8rem 0;font-size:.92rem}nav a{margin-right:1rem}
details{border:1px solid #d0d7de;border-radius:6px;padding:.2rem 1rem .6rem;margin:.8rem 0}
details>summary{cursor:pointer;font-weight:600;font-size:1.1rem;padding:.4rem 0}
.charts{display:flex;flex-wrap:wrap;gap:1rem;align-items:flex-start}
svg.lg-chart{max-width:100%;height:auto;font-family:system-ui,-apple-system,'Segoe UI',sans-serif;
font-size:12px}
svg.lg-chart text{fill:#1f2328}svg.lg-chart .tick,svg.lg-chart .small{fill:#57606a;font-size:11px}
svg.lg-chart .muted{fill:#6e7781}svg.lg-chart .axis-label{fill:#57606a}
svg.lg-chart .grid{stroke:#eaeef2}svg.lg-chart .axis{stroke:#8c959f}
svg.lg-chart .zero{stroke:#8c959f;stroke-dasharray:2 3}
svg.lg-chart .threshold{stroke:#cf222e;stroke-width:1.5;stroke-dasharray:6 3;fill:none}
svg.lg-chart .threshold-label{fill:#cf222e;font-size:11px}
svg.lg-chart .ci{stroke-width:2.5;stroke-linecap:round}svg.lg-chart .whisker{stroke-width:1.4}
svg.lg-chart .diagonal,svg.lg-chart .normalizer{stroke:#8c959f;stroke-dasharray:4 3}
svg.lg-chart .value{font-variant-numeric:tabular-nums}svg.lg-chart .point-label{font-size:11px}
svg.lg-chart .highlight{stroke:#fff;stroke-width:1}
@media print{details{break-inside:avoid}nav{display:none}}
"""


# ------------------------------------------------------------------------------------------ public API
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
    history = history if history is not None else summary.get("monitoring")
    metrics = _mapping(summary.get("metrics"))
    diagnostics = _mapping(summary.get("diagnostics"))
    decision = str(summary.get("decision") or "ERROR")
    title = f"LabelGate — {decision} — {summary.get('batch_id', '')}"
    nav = _nav(("decision", "Decision"), ("overview", "All questions"), ("questions", "Per question"),
               ("coverage", "Data coverage"), ("files", "Files"))
    body = [*_gate_header(summary, decision), *nav]
    body += _decision_section(summary, metrics)
    body += _overview_section(metrics)
    body += _questions_section(metrics, diagnostics, history)
    base = _report_dir(summary)
    body += _coverage_section(summary, base)
    body += _files_section(summary, base)
    return _page(title, body)


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
    stored = {**summary, "reports": {**_mapping(summary.get("reports")), **paths}}
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
    windows, episodes = list(view.get("windows") or []), list(view.get("episodes") or [])
    runs = list(view.get("runs") or [])
    body = [*_monitor_header(view, windows, episodes, runs),
            *_nav(("runs", "Gate runs"), ("episodes", "Drift episodes"),
                  ("agreement", "Agreement over time"))]
    body += _runs_section(runs)
    body += _episodes_section(episodes)
    body += _agreement_section(windows, episodes, _mapping(view.get("raters")))
    return _page("LabelGate monitoring report", body)


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
        for question, rows in _mapping(run.get("metrics")).items():
            for metric, row in _mapping(rows).items():
                row = _mapping(row)
                if metric not in _MONITORED or not finite(row.get("value")):
                    continue
                windows.append({
                    "question": question, "metric": metric, "window_start": run["created_at"],
                    "window_end": run.get("finished_at") or run["created_at"], "scope": "window",
                    "value": row.get("value"), "ci_low": row.get("ci_low"), "ci_high": row.get("ci_high"),
                    "n_items": row.get("n_items"), "n_ratings": None,
                    "threshold": _mapping(row.get("thresholds")).get("min_value"),
                    "batch_id": run.get("batch_id")})
    return {"windows": windows, "episodes": []}


# ------------------------------------------------------------------------------------------- page frame
def _page(title: str, body: list[str]) -> str:
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        # no network at all: the policy blocks any script, frame, font or remote image a bug could add
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "img-src data:\">",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        *body,
        f"<footer class='meta'><p>Written by LabelGate on {generated}. Self-contained: no script, no network."
        "</p></footer></body></html>"])


def _nav(*links: tuple[str, str]) -> list[str]:
    return ["<nav>" + "".join(f"<a href='#{anchor}'>{_e(text)}</a>" for anchor, text in links) + "</nav>"]


def _note(text: str) -> str:
    return f"<p class='note'>{_e(text)}</p>"


def _badge(decision: str) -> str:
    colour = _DECISION_COLOURS.get(decision, "#6e7781")
    return f"<span class='badge' style='background:{colour}'>{_e(decision)}</span>"


def _chip(state: str, text: str | None = None) -> str:
    state = state if state in _VERDICTS else "none"
    return f"<span class='chip {state}'>{_e(text or state)}</span>"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _num_cell(value: Any, digits: int = 3) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"<td class='num'>{value:,}</td>"
    return f"<td class='num'>{_e(fmt(value, digits))}</td>"


def _td(value: Any, cls: str = "") -> str:
    """A table cell with escaped text (None is empty); ``cls`` is a fixed class name of this module."""
    attr = f" class='{cls}'" if cls else ""
    return f"<td{attr}>{_e('' if value is None else value)}</td>"


def _tr(*cells: str) -> str:
    return "<tr>" + "".join(cells) + "</tr>"


def _head(*names: str) -> str:
    """Start of a table with escaped header cells (close it with ``</table>``)."""
    return "<table><tr>" + "".join(f"<th>{_e(n)}</th>" for n in names) + "</tr>"


def _joined(values: Any) -> str:
    return ", ".join(str(v) for v in values) if isinstance(values, (list, tuple)) else str(values or "")


def _interval(row: Mapping[str, Any]) -> str:
    low, high = row.get("ci_low"), row.get("ci_high")
    return f"[{fmt(low)}, {fmt(high)}]" if finite(low) and finite(high) else "—"


def _href(target: Any, base: Path | None = None) -> str | None:
    """A safe link target, or None.

    ``http``/``https``/``file`` URLs are kept; other schemes (``javascript:``, ``data:``...) are never
    linked. A local path inside ``base`` (the report's folder) becomes a relative link, so the run folder can
    be moved or archived; any other path becomes a ``file://`` URI.
    """
    text = str(target or "")
    if not text:
        return None
    scheme = urlsplit(text).scheme.lower()
    if scheme in ("http", "https", "file"):
        return text
    if len(scheme) > 1:
        return None
    path = Path(text).absolute()
    if base is not None:
        try:
            return path.relative_to(base.absolute()).as_posix()
        except ValueError:
            pass
    return path.as_uri()


def _link(target: Any, text: str | None = None, base: Path | None = None) -> str:
    href = _href(target, base)
    label = f"<code>{_e(text if text is not None else target)}</code>"
    return f"<a href='{_e(href)}'>{label}</a>" if href else label


def _report_dir(summary: Mapping[str, Any]) -> Path | None:
    """The folder of the gate report, when the summary records where it is (links become relative)."""
    html = _mapping(summary.get("reports")).get("html")
    local = html and len(urlsplit(str(html)).scheme) <= 1  # no URL scheme (or a Windows drive letter)
    return Path(str(html)).parent if local else None


# ----------------------------------------------------------------------------------------- gate report
def _gate_header(summary: Mapping[str, Any], decision: str) -> list[str]:
    when = summary.get("finished_at") or summary.get("created_at") or ""
    return [f"<header><h1>LabelGate gate report {_badge(decision)}</h1>",
            f"<p class='meta'>Batch <code>{_e(summary.get('batch_id', ''))}</code> · run "
            f"<code>{_e(summary.get('run_id', ''))}</code> · {_e(when)}"
            + (" · stored decision reused" if summary.get("reused") else "") + "</p></header>"]


def _decision_section(summary: Mapping[str, Any], metrics: Mapping[str, Any]) -> list[str]:
    states = Counter(_question_state(rows) for rows in metrics.values())
    no_verdict = f", {states['none']} without a verdict" if states["none"] else ""
    out = ["<section id='decision'><h2>Decision</h2>",
           f"<p>{_badge(str(summary.get('decision') or 'ERROR'))} {len(metrics)} question(s): "
           f"{states['pass']} pass, {states['reject']} reject, {states['review']} review{no_verdict}.</p>"]
    if summary.get("error_step"):
        out.append(f"<p>The run failed in step <code>{_e(summary['error_step'])}</code>; "
                   "the gate fails closed.</p>")
    out += _list("Reasons", summary.get("reasons") or ["every blocking expectation passes"])
    if summary.get("warnings"):
        out += _list("Warnings (not blocking)", summary["warnings"])
    return [*out, "</section>"]


def _list(title: str, items: Iterable[Any]) -> list[str]:
    return [f"<h3>{_e(title)}</h3><ul>", *[f"<li>{_e(item)}</li>" for item in items], "</ul>"]


def _question_state(rows: Mapping[str, Any]) -> str:
    """Worst verdict of the blocking expectations of a question (warnings do not count)."""
    verdicts = {str(_mapping(r).get("verdict")) for r in rows.values()
                if _mapping(r).get("verdict") and _mapping(r).get("severity", "blocking") != "warning"}
    for state in ("reject", "review", "pass"):
        if state in verdicts:
            return state
    return "none"


def _row(rows: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return _mapping(rows.get(name))


def _min_value(row: Mapping[str, Any]) -> float | None:
    value = _mapping(row.get("thresholds")).get("min_value")
    return float(value) if finite(value) else None


def _state(row: Mapping[str, Any]) -> str:
    verdict = row.get("verdict")
    return verdict if verdict in _VERDICTS else "none"


def _interval_row(label: str, row: Mapping[str, Any], threshold: bool = False) -> IntervalRow:
    return IntervalRow(label, row.get("value"), row.get("ci_low"), row.get("ci_high"), _state(row),
                       _min_value(row) if threshold else None)


def _overview_section(metrics: Mapping[str, Any]) -> list[str]:
    out = ["<section id='overview'><h2>All questions: normalized κx</h2>"]
    if not metrics:
        return [*out, _note("No metric was computed for this run."), "</section>"]
    ordered = sorted(metrics, key=lambda q: _sort_value(_row(metrics[q], "normalized_cross_kappa")))
    if any(finite(_row(metrics[q], "normalized_cross_kappa").get("value")) for q in ordered):
        rows = [_interval_row(q, _row(metrics[q], "normalized_cross_kappa"), threshold=True) for q in ordered]
        out.append("<p>Sorted from the lowest value; the red line (or tick) is the gate's minimum "
                   "(xRR paper Table 2 / Table 5).</p>")
        out.append(plots.interval_chart(rows, title="Normalized κx per question with intervals",
                                        x_label="normalized κx = κx / √(IRR crowd · IRR trusted)"))
    else:
        out.append(_note("Normalized κx was not computed for this run."))
    out += _overview_table(metrics, ordered)
    out += _fig7(metrics, ordered)
    return [*out, "</section>"]


def _sort_value(row: Mapping[str, Any]) -> tuple[int, float]:
    value = row.get("value")
    return (0, float(value)) if finite(value) else (1, 0.0)


def _overview_table(metrics: Mapping[str, Any], ordered: Sequence[str]) -> list[str]:
    with_rho = any(_row(metrics[q], "disattenuated_correlation") for q in ordered)
    out = [_head("question", "IRR crowd", "IRR trusted", "κx", "normalized κx", "interval", "minimum",
                 *(["ρxy"] if with_rho else []), "verdict")]
    for q in ordered:
        rows, nk = metrics[q], _row(metrics[q], "normalized_cross_kappa")
        rho = _num_cell(_row(rows, "disattenuated_correlation").get("value")) if with_rho else ""
        out.append(f"<tr><td><a href='#{_anchor(q)}'>{_e(q)}</a></td>"
                   f"{_num_cell(_row(rows, 'irr_crowd').get('value'))}"
                   f"{_num_cell(_row(rows, 'irr_trusted').get('value'))}"
                   f"{_num_cell(_row(rows, 'cross_kappa').get('value'))}{_num_cell(nk.get('value'))}"
                   f"<td class='num'>{_e(_interval(nk))}</td>{_num_cell(_min_value(nk), 2)}{rho}"
                   f"<td>{_chip(_question_state(rows))}</td></tr>")
    return [*out, "</table>"]


def _fig7(metrics: Mapping[str, Any], ordered: Sequence[str]) -> list[str]:
    out = ["<h3>Normalized κx against the disattenuated correlation of item means</h3>"]
    points = []
    for q in ordered:
        nk, rho = _row(metrics[q], "normalized_cross_kappa"), _row(metrics[q], "disattenuated_correlation")
        if finite(nk.get("value")) and finite(rho.get("value")):
            points.append(Point(nk["value"], rho["value"], nk.get("ci_low"), nk.get("ci_high"),
                                rho.get("ci_low"), rho.get("ci_high"), label=q,
                                group=_question_state(metrics[q]),
                                tooltip=f"{q}: normalized κx {fmt(nk['value'])} {_interval(nk)}, "
                                        f"ρxy {fmt(rho['value'])} {_interval(rho)}"))
    if not points:
        return [*out, _note("Not computed for this run: the disattenuated correlation (ρxy) needs numeric "
                            "labels and a 'disattenuated_correlation' metric.")]
    out.append("<p>One dot per question (xRR paper Fig. 7); the dashed diagonal is ρxy = normalized κx.</p>")
    out.append(plots.scatter_chart(points, title="Normalized κx against ρxy", x_label="normalized κx",
                                   y_label="disattenuated correlation ρxy", diagonal=True,
                                   all_intervals=True))
    return out


def _anchor(question: Any) -> str:
    """A fragment id for a question: a digest of its name, so any name gives a valid id."""
    return "q-" + hashlib.sha256(str(question).encode("utf-8")).hexdigest()[:16]


def _questions_section(metrics: Mapping[str, Any], diagnostics: Mapping[str, Any],
                       history: Mapping[str, Any] | None) -> list[str]:
    out = ["<section id='questions'><h2>Per question</h2>"]
    questions = list(metrics) + [q for q in diagnostics if q not in metrics]
    if not questions:
        return [*out, _note("No question was measured in this run."), "</section>"]
    windows = list(_mapping(history).get("windows") or [])
    episodes = list(_mapping(history).get("episodes") or [])
    for q in questions:
        rows = _mapping(metrics.get(q))
        state = _question_state(rows)
        opened = " open" if state != "pass" or len(questions) <= _OPEN_ALL_UP_TO else ""
        out.append(f"<details id='{_anchor(q)}'{opened}><summary>Question <code>{_e(q)}</code>"
                   f"{_chip(state)}</summary>")
        out += _expectations(rows)
        out += _triangle(q, rows)
        out += _raters(q, _mapping(diagnostics.get(q)))
        out += _design(q, _mapping(_mapping(diagnostics.get(q)).get("design")))
        out += _monitoring(q, windows, episodes, history is not None)
        out.append("</details>")
    return [*out, "</section>"]


def _ordered_metrics(rows: Mapping[str, Any]) -> list[str]:
    return [m for m in _ORDER if m in rows] + [m for m in rows if m not in _ORDER]


def _expectations(rows: Mapping[str, Any]) -> list[str]:
    if not rows:
        return [_note("No metric was computed for this question.")]
    out = ["<h4>Expectations and metrics</h4>",
           _head("metric", "severity", "threshold", "value", "interval", "items", "verdict", "note")]
    for name in _ordered_metrics(rows):
        row = _mapping(rows[name])
        thresholds = ", ".join(f"{k} {v}" for k, v in _mapping(row.get("thresholds")).items())
        level = f" ({row['ci_level']:.0%})" if finite(row.get("ci_level")) else ""
        verdict = _chip(_state(row), row.get("verdict")) if row.get("verdict") else ""
        label = _NAMES.get(name, name)
        name_cell = f"{_e(label)}" + (f" <code>{_e(name)}</code>" if label != name else "")
        interval = _interval(row) + (level if _interval(row) != "—" else "")
        out.append(_tr(f"<td>{name_cell}</td>", _td(row.get("severity")), _td(thresholds),
                       _num_cell(row.get("value")), _td(interval, "num"), _num_cell(row.get("n_items")),
                       f"<td>{verdict}</td>", _td(row.get("reason"))))
    return [*out, "</table>"]


def _triangle(question: str, rows: Mapping[str, Any]) -> list[str]:
    out = ["<h4>Crowd, trusted pool and the agreement between them</h4>"]
    nk, kx = _row(rows, "normalized_cross_kappa"), _row(rows, "cross_kappa")
    if not (nk or kx):
        return [*out, _note("Not computed for this question: no cross-replication metric was configured.")]
    crowd, trusted = _interval_row("IRR crowd", _row(rows, "irr_crowd")), _interval_row(
        "IRR trusted", _row(rows, "irr_trusted"))
    cross = _interval_row("κx", kx)
    normalized = _interval_row("normalized κx", nk, threshold=True)
    for r in (crowd, trusted, cross):
        r.state = "none"
    out.append("<p>As in the xRR paper's Fig. 4–6: each pool's internal agreement (IRR), the agreement "
               "across pools (κx, the edge) and κx normalized by both IRRs (top).</p><div class='charts'>")
    out.append(plots.triangle_chart(crowd, trusted, cross, normalized, title=f"xRR triangle of {question}"))
    out.append(plots.interval_chart([crowd, trusted, cross, normalized], width=560,
                                    title=f"IRR, κx and normalized κx of {question}", x_label="value"))
    return [*out, "</div>"]


def _raters(question: str, diag: Mapping[str, Any]) -> list[str]:
    out = ["<h4>Raters: agreement with the trusted pool against volume</h4>"]
    raters = [_mapping(r) for r in (diag.get("raters") or [])]
    if not raters:
        return [*out, _note("Per-rater diagnostics were not computed for this run.")]
    flagged = [r for r in raters if r.get("flags")]
    plotted = [r for r in raters if finite(r.get("kappa_vs_trusted")) and finite(r.get("n_ratings"))
               and r["n_ratings"] > 0]
    flags = Counter(str(f) for r in flagged for f in r.get("flags") or [])
    pools = Counter(str(r.get("pool") or "?") for r in raters)
    by_pool = ", ".join(f"{p}: {n:,}" for p, n in sorted(pools.items()))
    by_flag = f" ({', '.join(f'{f} × {n}' for f, n in sorted(flags.items()))})" if flags else ""
    out.append(f"<p>{len(raters):,} raters ({_e(by_pool)}); {len(flagged):,} flagged{_e(by_flag)}. Flagged "
               f"raters are red. {len(raters) - len(plotted):,} raters without a κ against the trusted pool "
               "are not drawn.</p>")
    if plotted:
        counts = [float(r["n_ratings"]) for r in plotted]
        log_x = max(counts) / max(min(counts), 1.0) >= 20
        # tooltips only where the chart draws a point on its own (flagged raters, or few raters)
        few = len(plotted) - len(flagged) <= plots.MAX_POINTS
        points = [Point(float(r["n_ratings"]), float(r["kappa_vs_trusted"]), y_low=r.get("kappa_ci_low"),
                        y_high=r.get("kappa_ci_high"), label=str(r.get("rater_id")),
                        tooltip=_rater_tip(r) if few or r.get("flags") else "",
                        highlight=bool(r.get("flags")), group=str(r.get("pool") or "none")) for r in plotted]
        out.append(plots.scatter_chart(points, title=f"Rater agreement with the trusted pool, {question}",
                                       x_label="ratings by the rater" + (" (log scale)" if log_x else ""),
                                       y_label="κ against the trusted pool", log_x=log_x))
    return out + _flagged_table(flagged)


def _rater_tip(r: Mapping[str, Any]) -> str:
    flags = ", ".join(str(f) for f in r.get("flags") or []) or "none"
    return (f"rater {r.get('rater_id')} ({r.get('pool') or '?'}): {r.get('n_ratings')} ratings, "
            f"{r.get('n_shared_items')} shared items, κ vs trusted {fmt(r.get('kappa_vs_trusted'))} "
            f"[{fmt(r.get('kappa_ci_low'))}, {fmt(r.get('kappa_ci_high'))}], flags: {flags}")


def _flagged_table(flagged: list[Mapping[str, Any]]) -> list[str]:
    if not flagged:
        return [_note("No rater is flagged.")]
    ranked = sorted(flagged, key=lambda r: _sort_value({"value": r.get("kappa_vs_trusted")}))
    shown = ranked[:_RATER_TABLE_MAX]
    out = [_head("rater", "pool", "ratings", "shared items", "κ vs trusted", "interval",
                 "leave-one-out agreement", "bias", "flags", "partners")]
    for r in shown:
        interval = _interval({"ci_low": r.get("kappa_ci_low"), "ci_high": r.get("kappa_ci_high")})
        out.append(_tr(f"<td><code>{_e(r.get('rater_id'))}</code></td>", _td(r.get("pool")),
                       _num_cell(r.get("n_ratings")), _num_cell(r.get("n_shared_items")),
                       _num_cell(r.get("kappa_vs_trusted")), _td(interval, "num"),
                       _num_cell(r.get("loo_agreement")), _num_cell(r.get("bias")),
                       _td(_joined(r.get("flags"))), _td(_joined(r.get("partners")))))
    out.append("</table>")
    if len(flagged) > len(shown):
        out.append(_note(f"{len(flagged) - len(shown):,} more flagged raters are in result.json."))
    return out


def _design(question: str, design: Mapping[str, Any]) -> list[str]:
    out = ["<h4>Ratings per item</h4>"]
    groups = {pool: {k: v for k, v in _mapping(_mapping(row).get("ratings_per_item_hist")).items()}
              for pool, row in design.items()}
    groups = {pool: hist for pool, hist in groups.items() if hist}
    if not groups:
        return [*out, _note("The ratings-per-item distribution was not computed for this run.")]
    totals = ", ".join(f"{pool}: {_mapping(row).get('n_items', '?')} items, "
                       f"{_mapping(row).get('n_ratings', '?')} ratings" for pool, row in design.items())
    out.append(f"<p>{_e(totals)}.</p>")
    out.append(plots.bar_chart(groups, title=f"Ratings per item, {question}", x_label="ratings per item",
                               y_label="items"))
    return out


# ---------------------------------------------------------------------------------------- monitoring
def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value))
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _monitoring(question: str, windows: list[Any], episodes: list[Any], has_history: bool) -> list[str]:
    out = ["<h4>Agreement over time</h4>"]
    mine = [_mapping(w) for w in windows if _mapping(w).get("question") == question]
    if not mine:
        text = ("No monitoring window for this question." if has_history
                else "Monitoring history was not computed for this run.")
        return [*out, _note(text)]
    eps = [_mapping(e) for e in episodes]
    charts = _metric_charts(question, mine, eps)
    mine_eps = [e for e in eps if e.get("question") == question]
    return [*out, *charts, *_episode_table(mine_eps, show_question=False)]


def _metric_charts(question: str, windows: list[Mapping[str, Any]],
                   episodes: list[Mapping[str, Any]]) -> list[str]:
    """One chart per metric group: normalized κx alone (with its threshold), the triangle's three sides
    together, then every other metric alone."""
    out = []
    present = list(dict.fromkeys(str(w.get("metric")) for w in windows))
    for group in _metric_groups(present):
        rows = [w for w in windows if str(w.get("metric")) in group]
        series = _group_series(group, rows)
        thresholds = [(t, float(w["threshold"])) for w in rows
                      if len(group) == 1 and finite(w.get("threshold"))
                      and (t := _parse_time(w.get("window_end"))) is not None]
        spans = [s for s in (_span(e) for e in episodes if e.get("question") == question
                             and (e.get("metric") is None or e.get("metric") in group)) if s]
        names = [_NAMES.get(m, m) if len(group) == 1 else _SHORT.get(m, m) for m in group]
        label = " · ".join(names)
        shaded = f", {len(spans)} drift episode(s) shaded" if spans else ""
        out.append(f"<p>{_e(label)}: {len(rows)} window(s){shaded}.</p>")
        y_label = _NAMES.get(group[0], group[0]) if len(group) == 1 else "value"
        out.append(plots.time_series_chart(series, title=f"{label} over time, {question}", y_label=y_label,
                                           thresholds=thresholds, spans=spans))
    return out


_GROUPS = (("normalized_cross_kappa",), ("irr_crowd", "irr_trusted", "cross_kappa"))
_SERIES_COLOURS = {"irr_crowd": plots.COLOURS["crowd"], "irr_trusted": plots.COLOURS["trusted"],
                   "cross_kappa": "#bf3989"}


def _metric_groups(present: list[str]) -> list[tuple[str, ...]]:
    groups = [tuple(m for m in g if m in present) for g in _GROUPS]
    grouped = {m for g in _GROUPS for m in g}
    rest = [m for m in _ORDER if m in present and m not in grouped]
    rest += [m for m in present if m not in _ORDER and m not in grouped]
    return [g for g in groups if g] + [(m,) for m in rest]


def _group_series(group: tuple[str, ...], rows: list[Mapping[str, Any]]) -> list[Series]:
    """Per metric: the per-window series (solid, with band and a marker per window up to
    ``_MARKERS_UP_TO`` windows) and the cumulative one (dashed line; band and markers only when there is no
    per-window series)."""
    series = []
    for metric in group:
        colour = _SERIES_COLOURS.get(metric, plots.COLOURS["none"])
        scoped = {scope: [p for p in (_time_point(w) for w in rows if str(w.get("metric")) == metric
                                      and (w.get("scope") or "window") == scope) if p]
                  for scope in ("window", "cumulative")}
        name = _SHORT.get(metric, metric) if len(group) > 1 else ""
        if scoped["window"]:
            series.append(Series(f"{name} per window".strip(), scoped["window"], colour=colour,
                                 markers=len(scoped["window"]) <= _MARKERS_UP_TO))
        if scoped["cumulative"]:
            alone = not scoped["window"]
            series.append(Series(f"{name} cumulative".strip(), scoped["cumulative"], dashed=True,
                                 colour=colour, band=alone,
                                 markers=alone and len(scoped["cumulative"]) <= _MARKERS_UP_TO))
    return series


def _time_point(w: Mapping[str, Any]) -> TimePoint | None:
    t = _parse_time(w.get("window_end")) or _parse_time(w.get("window_start"))
    if t is None:
        return None
    batch = f" · batch {w['batch_id']}" if w.get("batch_id") else ""
    start = _parse_time(w.get("window_start"))
    period = f"{start:%Y-%m-%d %H:%M} → {t:%Y-%m-%d %H:%M}" if start else f"{t:%Y-%m-%d %H:%M}"
    items = w.get("n_items") if w.get("n_items") is not None else "?"
    interval = f"[{fmt(w.get('ci_low'))}, {fmt(w.get('ci_high'))}]"
    tip = f"{period}{batch}: {fmt(w.get('value'))} {interval}, {items} items"
    return TimePoint(t, w.get("value"), w.get("ci_low"), w.get("ci_high"), tip)


def _span(e: Mapping[str, Any]) -> Span | None:
    start = _parse_time(e.get("opened_at"))
    if start is None:
        return None
    end = _parse_time(e.get("closed_at")) if e.get("closed_at") else None
    kind = "baseline" if e.get("kind") == "baseline" else "change"
    tip = (f"{kind} episode {e.get('episode_id', '')}: {e.get('reason') or ''}"
           + (" (open)" if end is None else ""))
    return Span(start, end, kind, tip)


def _episode_table(episodes: list[Mapping[str, Any]], show_question: bool = True) -> list[str]:
    if not episodes:
        return [_note("No drift episode.")]
    out = [_head(*(["question"] if show_question else []), "metric", "kind", "opened", "closed", "reason",
                 "worst raters")]
    for e in sorted(episodes, key=lambda e: str(e.get("opened_at") or ""), reverse=True):
        closed = _td(e["closed_at"]) if e.get("closed_at") else "<td><b class='reject'>open</b></td>"
        out.append(_tr(*([_td(e.get("question"))] if show_question else []), _td(e.get("metric") or "all"),
                       _td(e.get("kind")), _td(e.get("opened_at")), closed, _td(e.get("reason")),
                       _td(_joined(e.get("worst_raters")))))
    return [*out, "</table>"]


# ------------------------------------------------------------------------------------------ coverage
def _coverage_section(summary: Mapping[str, Any], base: Path | None) -> list[str]:
    out = ["<section id='coverage'><h2>Data coverage</h2>"]
    coverage = _mapping(summary.get("coverage"))
    if coverage:
        out.append("<h3>Overlap with the trusted replication</h3><table>")
        for key, value in coverage.items():
            shown = f"{value:.1%}" if key == "coverage" and finite(value) else (
                f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else fmt(value)
                if isinstance(value, float) else str(value))
            out.append(f"<tr><th>{_e(_COVERAGE.get(key, key))}</th><td class='num'>{_e(shown)}</td></tr>")
        out.append("</table>")
    else:
        out.append(_note("Coverage was not computed for this run."))
    out += _validation(_mapping(summary.get("validation")), _mapping(summary.get("reports")), base)
    return [*out, "</section>"]


def _validation(validation: Mapping[str, Any], reports: Mapping[str, Any], base: Path | None) -> list[str]:
    if not validation:
        return [_note("Input validation did not run.")]
    out = ["<h3>Input validation and quarantine</h3>",
           _head("table", "rows", "valid", "quarantined", "share", "policy", "quarantine file")]
    for table, info in validation.items():
        info = _mapping(info)
        share = info.get("invalid_share")
        file = reports.get(f"quarantine_{table}")
        out.append(_tr(_td(table), _num_cell(info.get("n_rows")), _num_cell(info.get("n_valid")),
                       _num_cell(info.get("n_invalid")), _td(f"{share:.1%}" if finite(share) else "—", "num"),
                       _td(info.get("reason")), f"<td>{_link(file, base=base) if file else '—'}</td>"))
    out.append("</table>")
    for table, info in validation.items():
        counts = _mapping(_mapping(info).get("error_counts"))
        if counts:
            out.append(f"<h4>Why rows of <code>{_e(table)}</code> were quarantined</h4>")
            out.append(_head("column:check", "rows"))
            out += [f"<tr><td><code>{_e(k)}</code></td>{_num_cell(v)}</tr>" for k, v in
                    sorted(counts.items(), key=lambda kv: -kv[1] if finite(kv[1]) else 0)]
            out.append("</table>")
            out += _quarantine_sample(reports.get(f"quarantine_{table}"))
    return out


def _quarantine_sample(path: Any) -> list[str]:
    """The first quarantined rows and their reasons, when the quarantine CSV is still there."""
    try:
        file = Path(str(path or ""))
        if not path or not file.is_file():
            return []
        with file.open(newline="", encoding="utf-8") as handle:
            rows = [row for _, row in zip(range(_QUARANTINE_SAMPLE), csv.DictReader(handle), strict=False)]
    except (OSError, csv.Error, UnicodeDecodeError):
        return []
    if not rows:
        return []
    out = [f"<p>First {len(rows)} quarantined rows (row number in the file and the reasons):</p><table>"
           "<tr><th>row</th><th>reasons</th></tr>"]
    out += [f"<tr><td class='num'>{_e(r.get('_row', ''))}</td><td>{_e(r.get('_reasons', ''))}</td></tr>"
            for r in rows]
    return [*out, "</table>"]


def _files_section(summary: Mapping[str, Any], base: Path | None) -> list[str]:
    reports = {k: v for k, v in _mapping(summary.get("reports")).items() if v}
    out = ["<section id='files'><h2>Files</h2>"]
    if reports:
        out.append("<ul>")
        out += [f"<li>{_e(k)}: {_link(v, base=base)}</li>" for k, v in sorted(reports.items())]
        out.append("</ul>")
    else:
        out.append(_note("No file was written for this run."))
    timing = _mapping(summary.get("timing"))
    if timing:
        out.append("<p class='meta'>Timing: " + _e(", ".join(f"{k} {fmt(v, 2)} s" for k, v in timing.items()))
                   + "</p>")
    hashes = [(k, summary.get(k)) for k in ("batch_hash", "config_hash") if summary.get(k)]
    if hashes:
        shown = " · ".join(f"{_e(k)} <code>{_e(v)}</code>" for k, v in hashes)
        out.append(f"<p class='meta'>{shown}</p>")
    return [*out, "</section>"]


# ------------------------------------------------------------------------------------- monitor report
def _monitor_header(view: Mapping[str, Any], windows: list[Any], episodes: list[Any],
                    runs: list[Any]) -> list[str]:
    open_episodes = [e for e in episodes if not _mapping(e).get("closed_at")]
    since = view.get("since")
    out = ["<header><h1>LabelGate monitoring report</h1>",
           f"<p class='meta'>{len(runs):,} gate run(s), {len(windows):,} window(s), {len(episodes):,} drift "
           f"episode(s) ({len(open_episodes):,} open)" + (f" since {_e(since)}" if since else "")
           + (f" · windows from {_e(view['source'])}" if view.get("source") else "") + "</p>"]
    out += [_note(str(n)) for n in view.get("notes") or []]
    return [*out, "</header>"]


def _runs_section(runs: list[Any]) -> list[str]:
    out = ["<section id='runs'><h2>Gate runs</h2>"]
    if not runs:
        return [*out, _note("No gate run in this period."), "</section>"]
    decisions = Counter(str(_mapping(r).get("decision")) for r in runs)
    out.append("<p>" + ", ".join(f"{_e(d)} {n}" for d, n in sorted(decisions.items())) + ".</p>")
    out.append(_head("started", "batch", "decision", "lowest normalized κx", "reasons", "report"))
    for run in runs:
        run = _mapping(run)
        values = [(float(v), q) for q, rows in _mapping(run.get("metrics")).items()
                  if finite(v := _row(_mapping(rows), "normalized_cross_kappa").get("value"))]
        lowest = min(values) if values else None
        low_text = f"{fmt(lowest[0])} ({lowest[1]})" if lowest else "—"
        report = _mapping(run.get("reports")).get("html")
        reasons = list(run.get("reasons") or [])
        more = f" (+{len(reasons) - 2} more)" if len(reasons) > 2 else ""
        out.append(_tr(_td(run.get("created_at")), f"<td><code>{_e(run.get('batch_id'))}</code></td>",
                       f"<td>{_badge(str(run.get('decision')))}</td>", _td(low_text, "num"),
                       _td("; ".join(str(r) for r in reasons[:2]) + more),
                       f"<td>{_link(report, 'report.html') if report else '—'}</td>"))
    return [*out, "</table></section>"]


def _episodes_section(episodes: list[Any]) -> list[str]:
    out = ["<section id='episodes'><h2>Drift episodes</h2>"]
    episodes = [_mapping(e) for e in episodes]
    open_first = sorted(episodes, key=lambda e: bool(e.get("closed_at")))
    return [*out, *_episode_table(open_first), "</section>"]


def _agreement_section(windows: list[Any], episodes: list[Any], raters: Mapping[str, Any]) -> list[str]:
    out = ["<section id='agreement'><h2>Agreement over time per question</h2>"]
    rows = [_mapping(w) for w in windows]
    if not rows and not raters:
        return [*out, _note("No monitoring window in this period."), "</section>"]
    out.append("<p>Solid line: per-window value with its interval band; dashed: cumulative value; red "
               "dashed: threshold; shaded: drift episodes (red: change, amber: below baseline).</p>")
    eps = [_mapping(e) for e in episodes]
    questions = list(dict.fromkeys([*(str(w.get("question")) for w in rows), *map(str, raters)]))
    flagged = {str(e.get("question")) for e in eps if not e.get("closed_at")}
    questions.sort(key=lambda q: (q not in flagged, q))
    for q in questions:
        opened = " open" if q in flagged or len(questions) <= _OPEN_ALL_UP_TO else ""
        chip = _chip("reject", "open episode") if q in flagged else ""
        out.append(f"<details id='{_anchor(q)}'{opened}><summary>Question <code>{_e(q)}</code>{chip}"
                   "</summary>")
        out += _metric_charts(q, [w for w in rows if str(w.get("question")) == q], eps)
        out += _episode_table([e for e in eps if str(e.get("question")) == q], show_question=False)
        if raters:
            out += _raters(q, {"raters": raters.get(q) or []})
        out.append("</details>")
    return [*out, "</section>"]
