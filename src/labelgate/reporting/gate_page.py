"""The values of the gate report, computed from a run summary for the ``gate.html.j2`` template.

Figures per question are drawn for at most :data:`FIGURE_QUESTIONS` questions: the worst verdicts first, then
the lowest normalized κx. Every question keeps its tables, and the overview figures cover all questions, so
a report with many questions stays quick to write and to open (see ``docs/reports.md``).
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from labelgate.gate.next_steps import of_summary
from labelgate.reporting import plots, sections
from labelgate.reporting.plots import IntervalRow, Point
from labelgate.reporting.sections import NAMES, ORDER, Figure, Figures, sort_value
from labelgate.reporting.units import units_section
from labelgate.reporting.values import anchor, finite, fmt, href, interval, mapping, number

__all__ = ["FIGURE_QUESTIONS", "gate_context", "question_state"]

#: Questions that get their own figures (triangle, raters, ratings per item, agreement over time).
FIGURE_QUESTIONS = 12
_OPEN_ALL_UP_TO = 6  # with more questions, only the failing ones start unfolded
_QUARANTINE_SAMPLE = 10
_VERDICTS = ("pass", "reject", "review")
_RANK = {"reject": 0, "review": 1, "none": 2, "pass": 3}
_COVERAGE = {"batch_items": "items in the batch", "trusted_items": "items in the trusted replication",
             "common_items": "items in both", "coverage": "share of batch items also rated by the trusted pool"}


def question_state(rows: Mapping[str, Any]) -> str:
    """Worst verdict of the blocking expectations of a question (warnings do not count)."""
    verdicts = {str(mapping(r).get("verdict")) for r in rows.values()
                if mapping(r).get("verdict") and mapping(r).get("severity", "blocking") != "warning"}
    for state in ("reject", "review", "pass"):
        if state in verdicts:
            return state
    return "none"


def _state(row: Mapping[str, Any]) -> str:
    verdict = row.get("verdict")
    return verdict if verdict in _VERDICTS else "none"


def _min_value(row: Mapping[str, Any]) -> float | None:
    value = mapping(row.get("thresholds")).get("min_value")
    return float(value) if finite(value) else None


def _interval_row(label: str, row: Mapping[str, Any], threshold: bool = False, state: str | None = None) -> IntervalRow:
    return IntervalRow(label, row.get("value"), row.get("ci_low"), row.get("ci_high"),
                       _state(row) if state is None else state, _min_value(row) if threshold else None)


def gate_context(summary: Mapping[str, Any], history: Mapping[str, Any] | None) -> dict[str, Any]:
    """Everything ``gate.html.j2`` shows, from the run ``summary`` and an optional monitoring ``history``."""
    figures = Figures()
    metrics = {str(q): mapping(rows) for q, rows in mapping(summary.get("metrics")).items()}
    diagnostics = {str(q): mapping(d) for q, d in mapping(summary.get("diagnostics")).items()}
    decision = str(summary.get("decision") or "ERROR")
    windows = sections.by_question(mapping(w) for w in mapping(history).get("windows") or [])
    episodes = sections.by_question(mapping(e) for e in mapping(history).get("episodes") or [])
    questions = list(metrics) + [q for q in diagnostics if q not in metrics]
    states = {q: question_state(metrics.get(q, {})) for q in questions}
    nk = {q: mapping(metrics.get(q, {}).get("normalized_cross_kappa")).get("value") for q in questions}
    worst = sorted(questions, key=lambda q: (_RANK[states[q]], sort_value(nk[q])))
    detailed = set(worst[:FIGURE_QUESTIONS])
    base = _report_dir(summary)
    counts = Counter(question_state(rows) for rows in metrics.values())
    return {
        "title": f"LabelGate — {decision} — {summary.get('batch_id', '')}", "decision": decision,
        "colour": sections.COLOURS.get(decision, "#6e7781"), "batch_id": summary.get("batch_id", ""),
        "run_id": summary.get("run_id", ""), "when": summary.get("finished_at") or summary.get("created_at") or "",
        "reused": bool(summary.get("reused")), "figures_hint": figures.hint,
        "n_questions": len(metrics), "counts": counts, "error_step": summary.get("error_step"),
        "reasons": list(summary.get("reasons") or ["every blocking expectation passes"]),
        "warnings": list(summary.get("warnings") or []), "next_steps": of_summary(summary),
        "overview": _overview(metrics, questions, windows, episodes, figures),
        "limited": len(questions) > FIGURE_QUESTIONS and figures.enabled, "figure_questions": FIGURE_QUESTIONS,
        "questions": [{**_question(q, metrics.get(q, {}), diagnostics.get(q, {}), states[q], len(questions),
                                   q in detailed, windows, episodes, history is not None, figures),
                       "units": units_section(mapping(summary.get("units")).get(q))} for q in questions],
        "coverage": _coverage(mapping(summary.get("coverage"))),
        "validation": _validation(mapping(summary.get("validation")), mapping(summary.get("reports")), base),
        "rater_policy": _rater_policy(mapping(summary.get("raters")), base),
        "files": [(k, href(v, base), v) for k, v in sorted(mapping(summary.get("reports")).items()) if v],
        "timing": ", ".join(f"{k} {fmt(v, 2)} s" for k, v in mapping(summary.get("timing")).items()),
        "hashes": [(k, summary.get(k)) for k in ("batch_hash", "config_hash") if summary.get(k)],
    }


def _report_dir(summary: Mapping[str, Any]) -> Path | None:
    """The folder of the gate report, when the summary records where it is (links become relative)."""
    html = mapping(summary.get("reports")).get("html")
    local = html and len(urlsplit(str(html)).scheme) <= 1  # no URL scheme (or a Windows drive letter)
    return Path(str(html)).parent if local else None


# --------------------------------------------------------------------------------------------- overview
def _overview(metrics: Mapping[str, Mapping[str, Any]], questions: Sequence[str],
              windows: Mapping[str, list[Mapping[str, Any]]], episodes: Mapping[str, list[Mapping[str, Any]]],
              figures: Figures) -> dict[str, Any]:
    if not metrics:
        return {"empty": True}
    ordered = sorted(metrics, key=lambda q: sort_value(mapping(metrics[q].get("normalized_cross_kappa")).get("value")))
    nk = {q: mapping(metrics[q].get("normalized_cross_kappa")) for q in ordered}
    forest = None
    if any(finite(nk[q].get("value")) for q in ordered):
        forest = figures.draw(plots.interval_chart, [_interval_row(q, nk[q], threshold=True) for q in ordered],
                              title="Normalized κx per question with intervals",
                              x_label="normalized κx = κx / √(IRR crowd · IRR trusted)")
    with_rho = any(metrics[q].get("disattenuated_correlation") for q in ordered)
    table = [{"name": q, "anchor": anchor(q), "state": question_state(metrics[q]),
              "irr_crowd": number(mapping(metrics[q].get("irr_crowd")).get("value")),
              "irr_trusted": number(mapping(metrics[q].get("irr_trusted")).get("value")),
              "kx": number(mapping(metrics[q].get("cross_kappa")).get("value")), "nk": number(nk[q].get("value")),
              "interval": interval(nk[q]), "minimum": number(_min_value(nk[q]), 2), "nk_state": _state(nk[q]),
              "nk_verdict": nk[q].get("verdict"), "nk_reason": nk[q].get("reason"),
              "rho": number(mapping(metrics[q].get("disattenuated_correlation")).get("value"))} for q in ordered]
    reasons = [f"{q}: {nk[q]['reason']}" for q in ordered if nk[q].get("reason") and not finite(nk[q].get("value"))]
    return {"empty": False, "forest": forest, "table": table, "with_rho": with_rho, "undefined": reasons,
            "computed": any(nk[q] for q in ordered),
            "fig7": _fig7(metrics, ordered, figures), "pools": _pools(metrics, ordered, figures),
            "strip": sections.strip_figure(questions, windows, episodes, figures) if windows else Figure()}


def _fig7(metrics: Mapping[str, Mapping[str, Any]], ordered: Sequence[str], figures: Figures) -> Figure | None:
    """Normalized κx against ρxy, one dot per question (xRR paper Fig. 7); None when ρxy is absent."""
    points = []
    for q in ordered:
        nk = mapping(metrics[q].get("normalized_cross_kappa"))
        rho = mapping(metrics[q].get("disattenuated_correlation"))
        if finite(nk.get("value")) and finite(rho.get("value")):
            state = question_state(metrics[q])
            points.append(Point(nk["value"], rho["value"], nk.get("ci_low"), nk.get("ci_high"), rho.get("ci_low"),
                                rho.get("ci_high"), label=q, group=state,
                                tooltip=f"{q}: normalized κx {fmt(nk['value'])} {interval(nk)}, "
                                        f"ρxy {fmt(rho['value'])} {interval(rho)}"))
    if not points:
        return None
    # the failing questions, lowest first (``ordered`` is), get a key beside their dot and their name in the column
    for k, p in enumerate([p for p in points if p.group in ("reject", "review")][:plots.MAX_LABELS]):
        p.callout = str(k + 1)
    return figures.draw(plots.scatter_chart, points, title="Normalized κx against ρxy", x_label="normalized κx",
                        y_label="disattenuated correlation ρxy", diagonal=True, all_intervals=len(points) <= 60,
                        names={"pass": "pass", "reject": "reject", "review": "review", "none": "no verdict"},
                        callout_title="failing questions")


def _pools(metrics: Mapping[str, Mapping[str, Any]], ordered: Sequence[str], figures: Figures) -> Figure:
    """IRR crowd, IRR trusted and κx of every question in one figure (the triangle's sides side by side)."""
    keys = {"irr_crowd": ("IRR crowd", "crowd"), "irr_trusted": ("IRR trusted", "trusted"), "cross_kappa": ("κx", "kx")}
    if not any(finite(mapping(metrics[q].get(k)).get("value")) for q in ordered for k in keys):
        return Figure()
    series = {name: [_interval_row(f"{q} · {name}", mapping(metrics[q].get(key)), state=colour) for q in ordered]
              for key, (name, colour) in keys.items()}
    return figures.draw(plots.group_chart, list(ordered), series, title="IRR crowd, IRR trusted and κx per question",
                        x_label="value")


# --------------------------------------------------------------------------------------------- question
def _question(q: str, rows: Mapping[str, Any], diag: Mapping[str, Any], state: str, n_questions: int,
              detailed: bool, windows: Mapping[str, list[Mapping[str, Any]]],
              episodes: Mapping[str, list[Mapping[str, Any]]], has_history: bool, figures: Figures) -> dict[str, Any]:
    design = mapping(diag.get("design"))
    return {"name": q, "anchor": anchor(q), "state": state, "detailed": detailed and figures.enabled,
            "open": state != "pass" or n_questions <= _OPEN_ALL_UP_TO,
            "expectations": _expectations(rows), "triangle": _triangle(q, rows, figures, detailed),
            "raters": sections.raters(q, diag.get("raters") or [], figures, detailed),
            "design": _design(q, design, figures, detailed),
            "monitoring": sections.monitoring(q, windows.get(q, []), episodes.get(q, []), figures, detailed)
            if has_history else None, "has_windows": bool(windows.get(q))}


def _expectations(rows: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name in [m for m in ORDER if m in rows] + [m for m in rows if m not in ORDER]:
        row = mapping(rows[name])
        level = f" ({row['ci_level']:.0%})" if finite(row.get("ci_level")) else ""
        shown = interval(row)
        out.append({"label": NAMES.get(name, name), "name": name, "severity": row.get("severity"),
                    "thresholds": ", ".join(f"{k} {v}" for k, v in mapping(row.get("thresholds")).items()),
                    "value": number(row.get("value")), "interval": shown + (level if shown != "—" else ""),
                    "n_items": number(row.get("n_items")), "verdict": row.get("verdict"), "state": _state(row),
                    "note": row.get("reason")})
    return out


def _triangle(q: str, rows: Mapping[str, Any], figures: Figures, detailed: bool) -> dict[str, Any]:
    nk, kx = mapping(rows.get("normalized_cross_kappa")), mapping(rows.get("cross_kappa"))
    if not (nk or kx):
        return {"computed": False}
    if not detailed:
        return {"computed": True, "figure": Figure()}
    crowd = _interval_row("IRR crowd", mapping(rows.get("irr_crowd")), state="none")
    trusted = _interval_row("IRR trusted", mapping(rows.get("irr_trusted")), state="none")
    figure = figures.draw(plots.triangle_chart, crowd, trusted, _interval_row("κx", kx, state="none"),
                          _interval_row("normalized κx", nk, threshold=True), title=f"xRR triangle of {q}")
    return {"computed": True, "figure": figure}


def _design(q: str, design: Mapping[str, Any], figures: Figures, detailed: bool) -> dict[str, Any]:
    groups = {str(pool): {k: v for k, v in mapping(mapping(row).get("ratings_per_item_hist")).items()}
              for pool, row in design.items()}
    groups = {pool: hist for pool, hist in groups.items() if hist}
    if not groups:
        return {"computed": False}
    totals = ", ".join(f"{pool}: {mapping(row).get('n_items', '?')} items, {mapping(row).get('n_ratings', '?')} ratings"
                       for pool, row in design.items())
    keys = sorted({k for hist in groups.values() for k in hist}, key=plots.sort_key)
    figure = Figure()
    if detailed:
        figure = figures.draw(plots.bar_chart, groups, title=f"Ratings per item, {q}", x_label="ratings per item",
                              y_label="items")
    table = [{"key": k, "counts": [number(groups[p].get(k)) if k in groups[p] else "—" for p in groups]}
             for k in keys]
    return {"computed": True, "totals": totals, "figure": figure, "pools": list(groups), "table": table}


# --------------------------------------------------------------------------------------------- coverage
def _coverage(coverage: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    for key, value in coverage.items():
        shown = f"{value:.1%}" if key == "coverage" and finite(value) else (
            number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value))
        out.append((_COVERAGE.get(key, key), shown))
    return out


def _rater_policy(section: Mapping[str, Any], base: Path | None) -> dict[str, Any] | None:
    """What the rater policy did: the policy, the raters it excluded (and their file), the decision with them."""
    if not section:
        return None
    excluded, kept = mapping(section.get("excluded")), mapping(section.get("with_flagged"))
    file = excluded.get("file")
    return {"policy": ", ".join(f"{flag}: {action}" for flag, action in mapping(section.get("policy")).items()),
            "n_flagged": len({str(mapping(r).get("rater_id")) for r in section.get("flagged") or []}),
            "excluded": list(excluded.get("raters") or []), "excluded_rows": number(excluded.get("n_rows")),
            "file": file, "href": href(file, base) if file else None,
            "with_flagged": kept.get("decision"), "with_flagged_reasons": list(kept.get("reasons") or [])}


def _validation(validation: Mapping[str, Any], reports: Mapping[str, Any], base: Path | None) -> list[dict[str, Any]]:
    out = []
    for table, info in validation.items():
        info = mapping(info)
        if "n_rows" not in info:  # the record's other findings (the rater policy's section) are not tables
            continue
        share = info.get("invalid_share")
        selection = mapping(info.get("selection"))
        if selection:
            info = {**info, "reason": f"{info.get('reason') or ''} {number(selection.get('n_outside'))} rows outside "
                                      f"the row selection {selection.get('where')} were left out.".strip()}
        file = reports.get(f"quarantine_{table}")
        counts = mapping(info.get("error_counts"))
        out.append({"table": table, "rows": number(info.get("n_rows")), "valid": number(info.get("n_valid")),
                    "invalid": number(info.get("n_invalid")), "share": f"{share:.1%}" if finite(share) else "—",
                    "reason": info.get("reason"), "file": file, "href": href(file, base) if file else None,
                    "errors": [(k, number(v)) for k, v in sorted(counts.items(),
                                                                  key=lambda kv: -kv[1] if finite(kv[1]) else 0)],
                    "sample": _quarantine_sample(file) if counts else []})
    return out


def _quarantine_sample(path: Any) -> list[tuple[str, str]]:
    """The first quarantined rows and their reasons, when the quarantine CSV is still there."""
    try:
        file = Path(str(path or ""))
        if not path or not file.is_file():
            return []
        with file.open(newline="", encoding="utf-8") as handle:
            rows: Iterable[Mapping[str, Any]] = csv.DictReader(handle)
            return [(str(r.get("_row", "")), str(r.get("_reasons", "")))
                    for _, r in zip(range(_QUARANTINE_SAMPLE), rows, strict=False)]
    except (OSError, csv.Error, UnicodeDecodeError):
        return []
