"""Static HTML summary of a gate run: decision, reasons, every metric with its interval, coverage.

One self-contained file (inline CSS, no scripts, no network). Every string that comes from the data or
the configuration (batch id, question names, reasons, labels) is HTML-escaped.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

_COLOURS = {"ACCEPT": "#1a7f37", "REJECT": "#cf222e", "REVIEW": "#9a6700", "ERROR": "#6e7781"}


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    return f"{value:.{digits}f}"


def _interval(row: dict[str, Any]) -> str:
    low, high = row.get("ci_low"), row.get("ci_high")
    if _num(low) == "—" or _num(high) == "—":
        return "—"
    return f"{_num(low)} – {_num(high)}"


def render_gate_report(summary: dict[str, Any]) -> str:
    """HTML for a gate run summary (the dict the flow returns / stores).

    Examples
    --------
    >>> page = render_gate_report({"decision": "REJECT", "batch_id": "<b>", "reasons": ["a & b"], "metrics": {}})
    >>> "&lt;b&gt;" in page and "a &amp; b" in page and "<b>" not in page.split("<body>")[1]
    True
    """
    decision = str(summary.get("decision", "ERROR"))
    colour = _COLOURS.get(decision, "#6e7781")
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>LabelGate — {_e(decision)} — {_e(summary.get('batch_id', ''))}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem;color:#1f2328}"
        "table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #d0d7de;padding:.3rem .6rem;"
        "text-align:left}th{background:#f6f8fa}.badge{display:inline-block;color:#fff;padding:.2rem .8rem;"
        "border-radius:1rem;font-weight:600}.pass{color:#1a7f37}.reject{color:#cf222e}.review{color:#9a6700}"
        "code{background:#f6f8fa;padding:0 .2rem}</style></head><body>",
        f"<h1>LabelGate gate report <span class='badge' style='background:{colour}'>{_e(decision)}</span></h1>",
        f"<p>Batch <code>{_e(summary.get('batch_id', ''))}</code> · run <code>{_e(summary.get('run_id', ''))}</code>"
        f" · {_e(summary.get('finished_at') or '')}</p>",
    ]
    parts += _list("Reasons", summary.get("reasons") or ["every blocking expectation passes"])
    if summary.get("warnings"):
        parts += _list("Warnings (not blocking)", summary["warnings"])
    parts += _metrics_tables(summary.get("metrics") or {})
    parts += _key_values("Coverage of the trusted replication", summary.get("coverage") or {})
    parts += _validation(summary.get("validation") or {}, summary.get("reports") or {})
    links = {k: v for k, v in (summary.get("reports") or {}).items() if v}
    if links:
        parts.append("<h2>Files</h2><ul>")
        parts += [f"<li>{_e(k)}: <code>{_e(v)}</code></li>" for k, v in sorted(links.items())]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _list(title: str, items: list[Any]) -> list[str]:
    return [f"<h2>{_e(title)}</h2><ul>", *[f"<li>{_e(item)}</li>" for item in items], "</ul>"]


def _metrics_tables(metrics: dict[str, Any]) -> list[str]:
    out = []
    for question, rows in metrics.items():
        out.append(f"<h2>Question <code>{_e(question)}</code></h2><table><tr><th>metric</th><th>value</th>"
                   "<th>interval</th><th>threshold</th><th>verdict</th><th>note</th></tr>")
        for name, row in rows.items():
            verdict = row.get("verdict") or ""
            thresholds = row.get("thresholds") or {}
            threshold = ", ".join(f"{k} {v}" for k, v in thresholds.items())
            note = row.get("reason") or (f"{row.get('severity')}" if row.get("severity") == "warning" else "")
            out.append(f"<tr><td>{_e(name)}</td><td>{_num(row.get('value'))}</td><td>{_interval(row)}</td>"
                       f"<td>{_e(threshold)}</td><td class='{_e(verdict)}'>{_e(verdict)}</td><td>{_e(note)}</td></tr>")
        out.append("</table>")
    return out


def _key_values(title: str, values: dict[str, Any]) -> list[str]:
    if not values:
        return []
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(_num(v) if isinstance(v, float) else v)}</td></tr>"
                   for k, v in values.items())
    return [f"<h2>{_e(title)}</h2><table>{rows}</table>"]


def _validation(summary: dict[str, Any], reports: dict[str, Any]) -> list[str]:
    if not summary:
        return []
    out = ["<h2>Input validation</h2><table><tr><th>table</th><th>rows</th><th>quarantined</th><th>policy</th>"
           "<th>quarantine file</th></tr>"]
    for table, info in summary.items():
        out.append(f"<tr><td>{_e(table)}</td><td>{_e(info.get('n_rows'))}</td><td>{_e(info.get('n_invalid'))}</td>"
                   f"<td>{_e(info.get('reason'))}</td><td><code>{_e(reports.get(f'quarantine_{table}', '—'))}"
                   "</code></td></tr>")
    out.append("</table>")
    return out


def write_gate_report(summary: dict[str, Any], directory: str | Path) -> dict[str, str]:
    """Write ``report.html`` and ``result.json`` into ``directory``; return their paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    page, data = directory / "report.html", directory / "result.json"
    page.write_text(render_gate_report(summary), encoding="utf-8")
    data.write_text(json.dumps(summary, indent=2, default=str, allow_nan=False), encoding="utf-8")
    return {"html": str(page), "json": str(data)}
