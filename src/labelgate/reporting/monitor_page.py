"""The values of the monitoring report, computed from the monitor's view for the ``monitor.html.j2`` template.

Charts over time are drawn for at most :data:`~labelgate.reporting.gate_page.FIGURE_QUESTIONS` questions
(open drift episodes first, then the lowest latest normalized κx); one strip chart shows normalized κx of every
question, and the other questions keep a summary table per metric.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from labelgate.reporting import sections
from labelgate.reporting.gate_page import FIGURE_QUESTIONS
from labelgate.reporting.sections import Figures, sort_value
from labelgate.reporting.values import anchor, count_windows, finite, fmt, href, mapping

__all__ = ["monitor_context"]

_OPEN_ALL_UP_TO = 6


def monitor_context(view: Mapping[str, Any]) -> dict[str, Any]:
    """Everything ``monitor.html.j2`` shows (see :func:`labelgate.reporting.report.render_monitor_report`)."""
    figures = Figures()
    windows = [mapping(w) for w in view.get("windows") or []]
    episodes = [mapping(e) for e in view.get("episodes") or []]
    runs = [mapping(r) for r in view.get("runs") or []]
    raters = mapping(view.get("raters"))
    return {
        "title": "LabelGate monitoring report", "n_runs": len(runs), "n_windows": count_windows(windows),
        "n_episodes": len(episodes), "n_open": sum(1 for e in episodes if not e.get("closed_at")),
        "since": view.get("since"), "source": view.get("source"), "notes": [str(n) for n in view.get("notes") or []],
        "figures_hint": figures.hint,
        "decisions": sorted(Counter(str(r.get("decision")) for r in runs).items()),
        "runs": [_run(r) for r in runs],
        "episodes": sections.episode_rows(sorted(episodes, key=lambda e: bool(e.get("closed_at")))),
        "agreement": _agreement(windows, episodes, raters, figures),
    }


def _run(run: Mapping[str, Any]) -> dict[str, Any]:
    values = [(float(v), q) for q, rows in mapping(run.get("metrics")).items()
              if finite(v := mapping(mapping(rows).get("normalized_cross_kappa")).get("value"))]
    lowest = min(values) if values else None
    reasons = [str(r) for r in run.get("reasons") or []]
    more = f" (+{len(reasons) - 2} more)" if len(reasons) > 2 else ""
    report = mapping(run.get("reports")).get("html")
    decision = str(run.get("decision"))
    return {"created_at": run.get("created_at"), "batch_id": run.get("batch_id"), "decision": decision,
            "colour": sections.COLOURS.get(decision, "#6e7781"),
            "lowest": f"{fmt(lowest[0])} ({lowest[1]})" if lowest else "—", "reasons": "; ".join(reasons[:2]) + more,
            "report": href(report) if report else None}


def _latest_nk(windows: Sequence[Mapping[str, Any]]) -> tuple[int, float]:
    mine = [w for w in windows if w.get("metric") == "normalized_cross_kappa" and finite(w.get("value"))]
    latest = max(mine, key=lambda w: str(w.get("window_end") or ""), default={})
    return sort_value(latest.get("value"))


def _agreement(windows: list[Mapping[str, Any]], episodes: list[Mapping[str, Any]], raters: Mapping[str, Any],
               figures: Figures) -> dict[str, Any]:
    if not windows and not raters:
        return {"empty": True}
    flagged = {str(e.get("question")) for e in episodes if not e.get("closed_at")}
    by_q, eps_by_q = sections.by_question(windows), sections.by_question(episodes)
    names = list(dict.fromkeys([*by_q, *map(str, raters)]))
    names.sort(key=lambda q: (q not in flagged, _latest_nk(by_q.get(q, [])), q))
    detailed = set(names[:FIGURE_QUESTIONS])
    questions = []
    for q in names:
        with_figures = q in detailed and figures.enabled
        questions.append({
            "name": q, "anchor": anchor(q), "flagged": q in flagged, "detailed": with_figures,
            "open": q in flagged or len(names) <= _OPEN_ALL_UP_TO,
            "monitoring": sections.monitoring(q, by_q.get(q, []), eps_by_q.get(q, []), figures, with_figures),
            "raters": sections.raters(q, raters.get(q) or [], figures, with_figures) if raters else None})
    strip = sections.strip_figure(names, by_q, eps_by_q, figures) if len(names) > 1 else sections.Figure()
    return {"empty": False, "strip": strip, "questions": questions,
            "limited": len(names) > FIGURE_QUESTIONS and figures.enabled, "figure_questions": FIGURE_QUESTIONS}
