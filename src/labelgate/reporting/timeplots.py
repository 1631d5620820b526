"""Figures over time for the reports: one metric group of one question, and every question in one strip chart.

Drawn with matplotlib like :mod:`labelgate.reporting.plots` (same conventions: marks, classes, escaped text).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from labelgate.reporting.figure import Chart, draw
from labelgate.reporting.plots import CHAR_IN, COLOURS, WIDTH, domain, margins
from labelgate.reporting.values import finite, fmt, shorten

__all__ = ["Series", "Span", "StripRow", "TimePoint", "strip_chart", "time_series_chart"]


@dataclass
class TimePoint:
    """One window of a monitored metric."""

    t: datetime
    value: float | None
    low: float | None = None
    high: float | None = None
    tooltip: str = ""


@dataclass
class Series:
    """A line with an optional interval band and a marker (with its tooltip) per window."""

    name: str
    points: list[TimePoint]
    dashed: bool = False
    colour: str = COLOURS["none"]
    band: bool = True
    markers: bool = True


@dataclass
class Span:
    """A shaded time span (a drift episode); ``end`` None means still open (to the right edge)."""

    start: datetime
    end: datetime | None
    kind: str = "change"
    tooltip: str = ""


def _time_axis(ax: Any, times: Sequence[datetime]) -> tuple[datetime, datetime]:
    """Date ticks in ISO form (2 to 8 of them) over the padded range of ``times``."""
    from datetime import timedelta

    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    low, high = min(times), max(times)
    if high - low < timedelta(minutes=1):  # one instant: a one-minute frame around it
        low, high = low - timedelta(seconds=30), high + timedelta(seconds=30)
    pad = (high - low) * 0.03
    low, high = low - pad, high + pad
    locator = AutoDateLocator(minticks=3, maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(
        locator, formats=["%Y", "%Y-%m", "%Y-%m-%d", "%H:%M", "%H:%M", "%H:%M:%S"],
        zero_formats=["", "%Y", "%Y-%m", "%Y-%m-%d", "%H:%M", "%H:%M"],
        offset_formats=["", "", "", "%Y-%m-%d", "%Y-%m-%d", "%Y-%m-%d %H:%M"]))
    ax.set_xlim(low, high)
    return low, high


def time_series_chart(series: Sequence[Series], *, title: str, y_label: str,
                      thresholds: Sequence[tuple[datetime, float]] = (), spans: Sequence[Span] = ()) -> str:
    """Values over time with interval bands, the threshold (a step when it changed) and shaded episodes.

    Marks: one ``band`` per series with ``band`` set and an interval, one ``line`` per series with two or
    more finite points, ``point`` markers (one tooltip each) for a series with ``markers`` set, one
    ``episode`` per span. Several series get a legend.

    Examples
    --------
    >>> from datetime import UTC, timedelta
    >>> t0 = datetime(2024, 1, 1, tzinfo=UTC)
    >>> pts = [TimePoint(t0 + timedelta(days=d), 0.8 - d / 20, 0.7 - d / 20, 0.9 - d / 20) for d in range(5)]
    >>> svg = time_series_chart([Series("window", pts)], title="t", y_label="κ",
    ...                         thresholds=[(t0, 0.7)], spans=[Span(t0 + timedelta(days=3), None)])
    >>> [svg.count(f'class="mark {k}"') for k in ("band", "line", "point", "episode")]
    [1, 1, 1, 1]
    """
    def paint(chart: Chart) -> None:
        fig = chart.figure
        margins(fig, left=0.7, right=0.25, bottom=0.45, top=0.35 if len(series) > 1 else 0.15)
        ax = fig.add_subplot()
        times = [p.t for s in series for p in s.points] + [s.start for s in spans] + [
            s.end for s in spans if s.end is not None]
        if not times:
            times = [t for t, _ in thresholds] or [datetime.fromtimestamp(0, UTC)]
        left, right = _time_axis(ax, times)
        values = [v for s in series for p in s.points for v in (p.value, p.low, p.high)]
        ax.set_ylim(*domain([*values, *(v for _, v in thresholds)]))
        for span in spans:
            colour = COLOURS.get(span.kind, COLOURS["change"])
            shade = ax.axvspan(max(span.start, left), right if span.end is None else min(span.end, right),
                               color=colour, alpha=0.12, lw=0)
            chart.mark(shade, "episode", tooltip=span.tooltip or f"{span.kind} episode")
        _threshold(chart, ax, thresholds, left, right)
        for s in series:
            _series(chart, ax, s)
        if len(series) > 1:
            ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncols=len(series), borderaxespad=0.2)
        ax.set_ylabel(y_label)
        if not any(finite(p.value) for s in series for p in s.points):
            ax.text(0.5, 0.5, "no window with a value", transform=ax.transAxes, ha="center",
                    color=COLOURS["muted"])

    return draw("timeseries", title, (WIDTH, 2.9), paint)


def _threshold(chart: Chart, ax: Any, thresholds: Sequence[tuple[datetime, float]], left: datetime,
               right: datetime) -> None:
    steps = sorted(((t, float(v)) for t, v in thresholds if finite(v)), key=lambda tv: tv[0])
    if not steps:
        return
    style = {"color": COLOURS["reject"], "lw": 1.3, "ls": (0, (6, 3))}
    if len({v for _, v in steps}) == 1:
        chart.tag(ax.axhline(steps[0][1], **style), "threshold")
        chart.tag(ax.text(0.01, steps[0][1], f"threshold {fmt(steps[0][1], 2)}", transform=ax.get_yaxis_transform(),
                          color=COLOURS["reject"], fontsize=7.5, va="bottom"), "threshold-label")
        return
    xs = [left] + [t for t, _ in steps[1:]] + [right]
    ys = [steps[0][1]] + [v for _, v in steps[1:]] + [steps[-1][1]]
    chart.tag(ax.step(xs, ys, where="post", **style)[0], "threshold step")


def _series(chart: Chart, ax: Any, s: Series) -> None:
    pts = sorted((p for p in s.points if finite(p.value)), key=lambda p: p.t)
    banded = [p for p in pts if finite(p.low) and finite(p.high)] if s.band else []
    if banded:
        band = ax.fill_between([p.t for p in banded], [p.low for p in banded], [p.high for p in banded],
                               color=s.colour, alpha=0.15, lw=0 if len(banded) > 1 else 4)
        chart.mark(band, "band", tooltip=f"{s.name}: interval band")
    if len(pts) >= 2:
        line = ax.plot([p.t for p in pts], [p.value for p in pts], color=s.colour, lw=1.8,
                       ls=(0, (6, 4)) if s.dashed else "-", label=s.name or None)[0]
        chart.mark(line, "line", tooltip=s.name)
    if s.markers and pts:
        dots = ax.plot([p.t for p in pts], [p.value for p in pts], ls="none", marker="o", ms=4, color=s.colour,
                       label=None if len(pts) >= 2 else s.name)[0]
        tips = [p.tooltip or f"{s.name} {p.t.isoformat()}: {fmt(p.value)} [{fmt(p.low)}, {fmt(p.high)}]"
                for p in pts]
        chart.mark(dots, "point", len(pts), tooltips=tips)


# ---------------------------------------------------------------------------------------- strip chart
@dataclass
class StripRow:
    """One question of a strip chart: its per-window values, thresholds and episodes."""

    label: str
    points: list[TimePoint]
    thresholds: list[tuple[datetime, float]]
    spans: list[Span]
    tooltip: str = ""


def strip_chart(rows: Sequence[StripRow], *, title: str, value_name: str) -> str:
    """Many questions over time in one figure: one thin row each, on one shared value scale.

    Each row holds the line of values (one ``line`` mark; a ``point`` when there is one window), its latest
    threshold as a dashed red segment and its episodes as shaded ``episode`` marks. The rows share the time
    axis and the value scale, so a drop stands out wherever it is.

    Examples
    --------
    >>> from datetime import UTC, timedelta
    >>> t0 = datetime(2024, 1, 1, tzinfo=UTC)
    >>> row = StripRow("q", [TimePoint(t0 + timedelta(days=d), 0.9 - d / 10) for d in range(3)], [(t0, 0.8)], [])
    >>> svg = strip_chart([row, StripRow("r", [TimePoint(t0, 0.5)], [], [])], title="t", value_name="κ")
    >>> svg.count('class="mark line"'), svg.count('class="mark point"')
    (1, 1)
    """
    label_in = min(max((len(shorten(r.label)) for r in rows), default=4) * CHAR_IN + 0.2, 2.6)
    values = [p.value for r in rows for p in r.points] + [v for r in rows for _, v in r.thresholds]
    low, high = domain(values, pad=0.02)

    def level(row: int, value: float) -> float:
        return len(rows) - 1 - row + 0.14 + 0.72 * (value - low) / (high - low)

    def paint(chart: Chart) -> None:
        fig = chart.figure
        margins(fig, left=label_in, right=0.25, bottom=0.45, top=0.3)
        ax = fig.add_subplot()
        times = [p.t for r in rows for p in r.points] + [s.start for r in rows for s in r.spans]
        left, right = _time_axis(ax, times or [datetime.fromtimestamp(0, UTC)])
        ax.set_ylim(0, max(len(rows), 1))
        ax.set_yticks([len(rows) - 0.5 - i for i in range(len(rows))], [shorten(r.label) for r in rows])
        ax.tick_params(axis="y", length=0)
        ax.grid(axis="y", visible=False)
        for i, r in enumerate(rows):
            base = len(rows) - 1 - i
            if i:
                ax.axhline(base + 1, color="#eaeef2", lw=0.8)
            for span in r.spans:
                start, end = max(span.start, left), right if span.end is None else min(span.end, right)
                shade = ax.fill_between([start, end], base + 0.04, base + 0.96, lw=0, alpha=0.16,
                                        color=COLOURS.get(span.kind, COLOURS["change"]))
                chart.mark(shade, "episode", tooltip=f"{r.label}: {span.tooltip or span.kind}")
            latest = [v for _, v in sorted(r.thresholds, key=lambda tv: tv[0]) if finite(v)]
            if latest:
                chart.tag(ax.hlines(level(i, latest[-1]), left, right, colors=COLOURS["reject"], lw=1,
                                    linestyles=(0, (4, 3))), "threshold")
            pts = sorted((p for p in r.points if finite(p.value)), key=lambda p: p.t)
            if len(pts) >= 2:
                line = ax.plot([p.t for p in pts], [level(i, float(p.value)) for p in pts],  # type: ignore[arg-type]
                               color=COLOURS["none"], lw=1.3)[0]
                chart.mark(line, "line", tooltip=r.tooltip or r.label)
            elif pts:
                dot = ax.plot([pts[0].t], [level(i, float(pts[0].value))], ls="none", marker="o", ms=4,  # type: ignore[arg-type]
                              color=COLOURS["none"])[0]
                chart.mark(dot, "point", tooltip=r.tooltip or r.label)
        ax.set_title(f"each row: {value_name} from {fmt(low, 2)} (bottom) to {fmt(high, 2)} (top); red dashes: "
                     "threshold; shaded: drift episodes", loc="left", fontsize=7.5, color=COLOURS["muted"])

    return draw("strip", title, (WIDTH, 0.8 + 0.3 * max(len(rows), 1)), paint)
