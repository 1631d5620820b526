"""Parts shared by the gate and the monitoring report: figures (or notes), raters, agreement over time, episodes.

The builders turn the plain dicts of a run or of the monitor into plain values for the templates (text is
escaped there, by Jinja2's autoescape) and draw the figures through :mod:`labelgate.reporting.plots`.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from labelgate.reporting import plots, timeplots
from labelgate.reporting.figure import INSTALL_HINT, available
from labelgate.reporting.plots import Point
from labelgate.reporting.timeplots import Series, Span, TimePoint
from labelgate.reporting.values import count_windows, finite, fmt, interval, mapping, number, parse_time

__all__ = ["COLOURS", "NAMES", "Figure", "Figures", "by_question", "episode_rows", "monitoring", "rater_judgement",
           "raters", "sort_value", "strip_figure"]

_log = logging.getLogger(__name__)

COLOURS = {"ACCEPT": "#1a7f37", "REJECT": "#cf222e", "REVIEW": "#9a6700", "ERROR": "#6e7781"}
#: Metrics of a question in display order; the others follow in their stored order.
ORDER = ("normalized_cross_kappa", "cross_kappa", "irr_crowd", "irr_trusted", "irr_baseline", "difference",
         "ratio", "disattenuated_correlation", "spa", "labeler_icc")
NAMES = {"normalized_cross_kappa": "normalized κx", "cross_kappa": "κx (cross-replication kappa)",
         "irr_crowd": "IRR of the crowd", "irr_trusted": "IRR of the trusted pool",
         "irr_baseline": "IRR at or above the trusted baseline", "difference": "IRR crowd − IRR trusted",
         "ratio": "IRR crowd / IRR trusted", "disattenuated_correlation": "disattenuated correlation ρxy",
         "spa": "SPA", "labeler_icc": "labeler ICC"}
#: Short names for legends.
SHORT = {"irr_crowd": "IRR crowd", "irr_trusted": "IRR trusted", "cross_kappa": "κx",
         "normalized_cross_kappa": "normalized κx"}
_GROUPS = (("normalized_cross_kappa",), ("irr_crowd", "irr_trusted", "cross_kappa"))
_SERIES_COLOURS = {"irr_crowd": plots.COLOURS["crowd"], "irr_trusted": plots.COLOURS["trusted"],
                   "cross_kappa": plots.COLOURS["kx"]}
RATER_TABLE_MAX = 100
#: Raters listed under "too few items to judge" (the rest are counted; result.json has them all).
UNJUDGED_TABLE_MAX = 20
_MARKERS_UP_TO = 200  # longer series are drawn as a line and band only (size)


@dataclass(frozen=True)
class Figure:
    """A drawn figure (inline SVG) or the note that replaces it; both None when figures are off."""

    svg: Markup | None = None
    note: str | None = None


class Figures:
    """Draws figures when matplotlib is installed; a failing figure becomes a note, never an error.

    A report must never fail because of a figure: the gate's decision is already made when the report is
    written, and a crash here would turn it into ERROR.
    """

    def __init__(self) -> None:
        self.enabled = available()
        self.hint = None if self.enabled else (
            f"Figures are not drawn: matplotlib is not installed ({INSTALL_HINT}). The tables hold every value.")

    def draw(self, paint: Callable[..., str], *args: Any, **kwargs: Any) -> Figure:
        """``paint(*args, **kwargs)`` as a :class:`Figure`."""
        if not self.enabled:
            return Figure()
        try:
            return Figure(svg=Markup(paint(*args, **kwargs)))
        except Exception as exc:
            _log.warning("report figure %s failed", getattr(paint, "__name__", paint), exc_info=True)
            return Figure(note=f"This figure could not be drawn ({type(exc).__name__}: {exc}).")


def sort_value(value: Any) -> tuple[int, float]:
    """Sort key: finite values first, ascending."""
    return (0, float(value)) if finite(value) else (1, 0.0)


def joined(values: Any) -> str:
    """A list as comma-separated text."""
    return ", ".join(str(v) for v in values) if isinstance(values, (list, tuple)) else str(values or "")


# ---------------------------------------------------------------------------------------------- raters
def raters(question: str, rows: Iterable[Any], figures: Figures, with_figure: bool) -> dict[str, Any]:
    """The rater part of a question: counts, the agreement-vs-volume scatter and the flagged raters.

    The scatter labels only the :data:`~labelgate.reporting.plots.MAX_LABELS` lowest-κ flagged raters; every
    flagged rater keeps a tooltip, and the table lists them worst first (up to 100, numbered as labelled).
    """
    all_rows = [mapping(r) for r in rows]
    if not all_rows:
        return {"computed": False}
    flagged = sorted((r for r in all_rows if r.get("flags")), key=lambda r: sort_value(r.get("kappa_vs_trusted")))
    plotted = [r for r in all_rows if finite(r.get("kappa_vs_trusted")) and finite(r.get("n_ratings"))
               and r["n_ratings"] > 0]
    flags = Counter(str(f) for r in flagged for f in r.get("flags") or [])
    pools = Counter(str(r.get("pool") or "?") for r in all_rows)
    by_pool = ", ".join(f"{p}: {n:,}" for p, n in sorted(pools.items()))
    by_flag = f" ({', '.join(f'{f} × {n}' for f, n in sorted(flags.items()))})" if flags else ""
    ranks = {id(r): k + 1 for k, r in enumerate(flagged)}
    drawn = {id(r) for r in plotted}
    # the lowest-κ flagged raters that are drawn get their table rank beside their point (flagged is lowest first)
    with_figure = with_figure and figures.enabled and bool(plotted)
    labelled = {id(r) for r in [r for r in flagged if id(r) in drawn][:plots.MAX_LABELS]} if with_figure else set()
    figure = Figure()
    if with_figure:
        counts = [float(r["n_ratings"]) for r in plotted]
        log_x = max(counts) / max(min(counts), 1.0) >= 20
        points = [Point(float(r["n_ratings"]), float(r["kappa_vs_trusted"]), y_low=r.get("kappa_ci_low"),
                        y_high=r.get("kappa_ci_high"), label=str(r.get("rater_id")), tooltip=_rater_tip(r),
                        highlight=bool(r.get("flags")), group=str(r.get("pool") or "none"),
                        callout=str(ranks[id(r)]) if id(r) in labelled else "") for r in plotted]
        figure = figures.draw(plots.scatter_chart, points, title=f"Rater agreement with the trusted pool, {question}",
                              x_label="ratings by the rater" + (" (log scale)" if log_x else ""),
                              y_label="κ against the trusted pool", log_x=log_x, callout_title="lowest κ, flagged",
                              y_range=(-1.0, 1.0))
    table = [{"rank": k + 1, "rater": r.get("rater_id"), "pool": r.get("pool"), "ratings": number(r.get("n_ratings")),
              "shared": number(r.get("n_shared_items")), "kappa": number(r.get("kappa_vs_trusted")),
              "interval": interval(r, "kappa_ci_low", "kappa_ci_high"), "loo": number(r.get("loo_agreement")),
              "bias": number(r.get("bias")), "flags": joined(r.get("flags")), "partners": joined(r.get("partners")),
              "labelled": id(r) in labelled}
             for k, r in enumerate(flagged[:RATER_TABLE_MAX])]
    return {"computed": True, "n": len(all_rows), "by_pool": by_pool, "n_flagged": len(flagged), "by_flag": by_flag,
            "not_drawn": len(all_rows) - len(plotted), "figure": figure, "labelled": len(labelled),
            "table": table, "more": max(len(flagged) - RATER_TABLE_MAX, 0), **_unjudged(all_rows)}


def _unjudged(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The raters the data cannot judge yet (``judged`` false): counted, and listed closest to a judgement first.

    Each shows its items on the basis it is (or will be) judged on and the workload it needs
    (:func:`labelgate.metrics.diagnostics.judge_rows`). Rows of older records carry no ``judged``: not counted.
    """
    judged = [r for r in rows if "judged" in r]
    waiting = [r for r in judged if not r.get("judged") and not r.get("flags")]
    waiting.sort(key=lambda r: (sort_value(_shortfall(r)), str(r.get("rater_id"))))
    table = [{"rater": r.get("rater_id"), "pool": r.get("pool"), "n_items": number(_basis_items(r)),
              "basis": _basis_name(r), "needs": _needs_text(r), "kappa": number(_agreement(r))}
             for r in waiting[:UNJUDGED_TABLE_MAX]]
    return {"n_judgeable": len(judged), "n_judged": sum(bool(r.get("judged")) for r in judged),
            "n_too_few": len(waiting), "too_few": table, "too_few_more": max(len(waiting) - UNJUDGED_TABLE_MAX, 0)}


def _basis_name(r: Mapping[str, Any]) -> str:
    workload = mapping(r.get("workload"))
    basis = r.get("agreement_basis") or workload.get("basis")
    return "co-rated" if basis == "peers" else "shared"


def _basis_items(r: Mapping[str, Any]) -> Any:
    return r.get("n_loo_items") if _basis_name(r) == "co-rated" else r.get("n_shared_items")


def _agreement(r: Mapping[str, Any]) -> Any:
    return r.get("loo_agreement") if _basis_name(r) == "co-rated" else r.get("kappa_vs_trusted")


def _shortfall(r: Mapping[str, Any]) -> float | None:
    needs, have = r.get("needs_items"), _basis_items(r)
    return float(needs) - float(have) if finite(needs) and finite(have) else None


def rater_judgement(r: Mapping[str, Any]) -> str:
    """How the data judges a rater, in words: flagged, judged, or "too few items to judge (needs ≥ N shared items)".

    >>> rater_judgement({"judged": False, "flags": [], "needs_items": 23, "agreement_basis": "trusted"})
    'too few items to judge (needs ≥ 23 shared items)'
    """
    if "low_agreement" in (r.get("flags") or []):
        return "flagged low_agreement"
    if "judged" not in r:
        return ""
    return "judged" if r.get("judged") else f"too few items to judge ({_needs_text(r)})"


def _needs_text(r: Mapping[str, Any]) -> str:
    needs = r.get("needs_items")
    return f"needs ≥ {int(needs):,} {_basis_name(r)} items" if finite(needs) else "no workload reaches the power"


def _rater_tip(r: Mapping[str, Any]) -> str:
    flags = ", ".join(str(f) for f in r.get("flags") or []) or "none"
    judgement = rater_judgement(r)
    return (f"rater {r.get('rater_id')} ({r.get('pool') or '?'}): {r.get('n_ratings')} ratings, "
            f"{r.get('n_shared_items')} shared items, κ vs trusted {fmt(r.get('kappa_vs_trusted'))} "
            f"[{fmt(r.get('kappa_ci_low'))}, {fmt(r.get('kappa_ci_high'))}], flags: {flags}"
            + (f"; {judgement}" if judgement and not judgement.startswith("flagged") else ""))


# ----------------------------------------------------------------------------------- agreement over time
def by_question(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Window or episode rows grouped by their question (once, rather than one scan per question)."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(str(row.get("question")), []).append(row)
    return grouped


def monitoring(question: str, mine: Sequence[Mapping[str, Any]], eps: Sequence[Mapping[str, Any]],
               figures: Figures, with_figures: bool) -> dict[str, Any]:
    """Agreement over time of one question (its windows and episodes): per metric group a chart (or a summary
    row per metric) and its episodes."""
    present = list(dict.fromkeys(str(w.get("metric")) for w in mine))
    charts, summary = [], []
    for group in metric_groups(present):
        rows = [w for w in mine if str(w.get("metric")) in group]
        names = [NAMES.get(m, m) if len(group) == 1 else SHORT.get(m, m) for m in group]
        label = " · ".join(names)
        spans = [s for s in (_span(e) for e in eps if not _metrics(e) or set(_metrics(e)) & set(group)) if s]
        if with_figures:
            thresholds = [(t, float(w["threshold"])) for w in rows
                          if len(group) == 1 and finite(w.get("threshold"))
                          and (t := parse_time(w.get("window_end"))) is not None]
            y_label = NAMES.get(group[0], group[0]) if len(group) == 1 else "value"
            figure = figures.draw(timeplots.time_series_chart, _group_series(group, rows),
                                  title=f"{label} over time, {question}", y_label=y_label, thresholds=thresholds,
                                  spans=spans)
            shaded = f", {len(spans)} drift episode(s) shaded" if spans else ""
            charts.append({"text": f"{label}: {count_windows(rows)} window(s){shaded}.", "figure": figure})
        summary += [_summary_row(m, [w for w in rows if str(w.get("metric")) == m]) for m in group]
    return {"charts": charts, "summary": summary, "episodes": episode_rows(eps, show_question=False),
            "n_windows": count_windows(mine)}


def metric_groups(present: Sequence[str]) -> list[tuple[str, ...]]:
    """Normalized κx alone, the triangle's three sides together, then every other metric alone."""
    groups = [tuple(m for m in g if m in present) for g in _GROUPS]
    grouped = {m for g in _GROUPS for m in g}
    rest = [m for m in ORDER if m in present and m not in grouped]
    rest += [m for m in present if m not in ORDER and m not in grouped]
    return [g for g in groups if g] + [(m,) for m in rest]


def _summary_row(metric: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One metric over time in one table row: windows, latest value and interval, lowest value, threshold."""
    scoped = [w for w in rows if (w.get("scope") or "window") == "window"] or list(rows)
    ordered = sorted(scoped, key=lambda w: str(w.get("window_end") or ""))
    values = [float(w["value"]) for w in ordered if finite(w.get("value"))]
    last = ordered[-1] if ordered else {}
    return {"metric": NAMES.get(metric, metric), "windows": len(ordered), "last_end": last.get("window_end"),
            "last": fmt(last.get("value")), "interval": interval(last), "lowest": fmt(min(values) if values else None),
            "threshold": fmt(last.get("threshold"), 2)}


def _group_series(group: tuple[str, ...], rows: Sequence[Mapping[str, Any]]) -> list[Series]:
    """Per metric: the per-window series (solid, band, a marker per window up to 200 windows) and the
    cumulative one (dashed; band and markers only when there is no per-window series)."""
    series = []
    for metric in group:
        colour = _SERIES_COLOURS.get(metric, plots.COLOURS["none"])
        scoped = {scope: [p for p in (_time_point(w) for w in rows if str(w.get("metric")) == metric
                                      and (w.get("scope") or "window") == scope) if p]
                  for scope in ("window", "cumulative")}
        name = SHORT.get(metric, metric) if len(group) > 1 else ""
        if scoped["window"]:
            series.append(Series(f"{name} per window".strip(), scoped["window"], colour=colour,
                                 markers=len(scoped["window"]) <= _MARKERS_UP_TO))
        if scoped["cumulative"]:
            alone = not scoped["window"]
            series.append(Series(f"{name} cumulative".strip(), scoped["cumulative"], dashed=True, colour=colour,
                                 band=alone, markers=alone and len(scoped["cumulative"]) <= _MARKERS_UP_TO))
    return series


def _time_point(w: Mapping[str, Any]) -> TimePoint | None:
    t = parse_time(w.get("window_end")) or parse_time(w.get("window_start"))
    if t is None:
        return None
    batch = f" · batch {w['batch_id']}" if w.get("batch_id") else ""
    start = parse_time(w.get("window_start"))
    period = f"{start:%Y-%m-%d %H:%M} → {t:%Y-%m-%d %H:%M}" if start else f"{t:%Y-%m-%d %H:%M}"
    items = w.get("n_items") if w.get("n_items") is not None else "?"
    tip = f"{period}{batch}: {fmt(w.get('value'))} {interval(w)}, {items} items"
    return TimePoint(t, w.get("value"), w.get("ci_low"), w.get("ci_high"), tip)


def _metrics(e: Mapping[str, Any]) -> list[str]:
    """Every series an episode's alarms are on (an episode row without ``metrics``: its one ``metric``)."""
    if e.get("metrics"):
        return [str(m) for m in e["metrics"]]
    return [str(e["metric"])] if e.get("metric") is not None else []


def _alarms(e: Mapping[str, Any]) -> str:
    """An episode's alarms for a table cell: ``metric (kind)`` each, in the order they fired."""
    alarms = e.get("alarms") or []
    if not alarms:
        return str(e.get("metric") or "all")
    return ", ".join(dict.fromkeys(f"{a.get('metric')} ({a.get('kind')})" for a in alarms))


def _span(e: Mapping[str, Any]) -> Span | None:
    start = parse_time(e.get("opened_at"))
    if start is None:
        return None
    end = parse_time(e.get("closed_at")) if e.get("closed_at") else None
    kind = "baseline" if e.get("kind") == "baseline" else "change"
    tip = f"{kind} episode {e.get('episode_id', '')}: {_reasons(e)}" + (" (open)" if end is None else "")
    return Span(start, end, kind, tip)


def strip_figure(questions: Sequence[str], windows: Mapping[str, Sequence[Mapping[str, Any]]],
                 episodes: Mapping[str, Sequence[Mapping[str, Any]]], figures: Figures) -> Figure:
    """Normalized κx over time for every question in one figure (per-window values, else cumulative);
    ``windows`` and ``episodes`` are grouped by question."""
    rows = []
    for q in questions:
        mine = [w for w in windows.get(q, ()) if w.get("metric") == "normalized_cross_kappa"]
        scoped = [w for w in mine if (w.get("scope") or "window") == "window"] or mine
        points = [p for p in (_time_point(w) for w in scoped) if p]
        if not points:
            continue
        thresholds = [(t, float(w["threshold"])) for w in scoped
                      if finite(w.get("threshold")) and (t := parse_time(w.get("window_end"))) is not None]
        spans = [s for s in (_span(e) for e in episodes.get(q, ())
                             if not _metrics(e) or "normalized_cross_kappa" in _metrics(e)) if s]
        values = [p.value for p in points if finite(p.value)]
        last = max(points, key=lambda p: p.t)
        tip = (f"{q}: {len(points)} window(s), latest {fmt(last.value)} {_interval_of(last)}, lowest "
               f"{fmt(min(values) if values else None)}" + (f", {len(spans)} episode(s)" if spans else ""))
        rows.append(timeplots.StripRow(q, points, thresholds, spans, tip))
    if not rows:
        return Figure()
    return figures.draw(timeplots.strip_chart, rows, title="Normalized κx over time, every question",
                        value_name="normalized κx")


def _interval_of(p: TimePoint) -> str:
    return f"[{fmt(p.low)}, {fmt(p.high)}]" if finite(p.low) and finite(p.high) else ""


def episode_rows(episodes: Iterable[Mapping[str, Any]], show_question: bool = True) -> list[dict[str, Any]]:
    """Drift episodes for a table, newest first."""
    ordered = sorted(episodes, key=lambda e: str(e.get("opened_at") or ""), reverse=True)
    return [{"question": e.get("question") if show_question else None, "metric": _alarms(e),
             "kind": e.get("kind"), "opened": e.get("opened_at"), "closed": e.get("closed_at"),
             "reason": _reasons(e), "worst": joined(e.get("worst_raters"))} for e in ordered]


def _reasons(e: Mapping[str, Any]) -> str:
    """An episode's reason: each alarm's, with its series and start, when it has several."""
    alarms = e.get("alarms") or []
    if len(alarms) < 2:
        return str(e.get("reason") or "")
    return "; ".join(f"{a.get('metric')} ({a.get('kind')}) since {a.get('since')}: {a.get('reason')}"
                     for a in alarms)
