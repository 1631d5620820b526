"""The report's figures, drawn with matplotlib and returned as inline SVG (see :mod:`labelgate.reporting.figure`);
the figures over time are in :mod:`labelgate.reporting.timeplots`.

Each function takes plain values (the dataclasses below), draws one figure and returns its ``<svg>`` text;
it raises :class:`ImportError` when matplotlib is not installed. Every drawn data item is registered as a
mark (class ``mark KIND``, ``data-n`` items, a ``<title>`` tooltip); thresholds, diagonals and labels carry a
class of their own. Text is never interpreted: ids with ``$`` or ``<`` are drawn and escaped as typed.

Readability with many items is designed in rather than left to chance: ordinary scatter points are
translucent (more points, more transparent) and unlabelled, and only the few worst highlighted points get a
label, in a column beside the axes with a leader line, so labels never overlap the data or each other.

Examples
--------
>>> svg = interval_chart([IntervalRow("q<1>", 0.7, 0.6, 0.8, state="reject", threshold=0.8)],
...                      title="normalized κx", x_label="value")
>>> svg.startswith("<svg") and "q&lt;1&gt;" in svg and "q<1>" not in svg
True
>>> 'class="mark point"' in svg and 'data-marks="2"' in svg
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labelgate.reporting.figure import Chart, draw
from labelgate.reporting.values import finite, fmt, shorten

__all__ = ["CHAR_IN", "COLOURS", "MAX_LABELS", "WIDTH", "IntervalRow", "Point", "bar_chart", "domain", "group_chart",
           "interval_chart", "margins", "scatter_chart", "sort_key", "triangle_chart"]

#: Colours of verdicts and pools (GitHub Primer palette: readable on white, distinguishable in grey print).
COLOURS = {"pass": "#1a7f37", "reject": "#cf222e", "review": "#9a6700", "none": "#0969da",
           "crowd": "#0969da", "trusted": "#8250df", "muted": "#8c959f", "text": "#1f2328",
           "baseline": "#bf8700", "change": "#cf222e", "kx": "#bf3989"}
#: At most this many highlighted points are labelled in a scatter (the rest: tooltips and the table).
MAX_LABELS = 8
#: Up to this many ordinary points per group keep one tooltip each.
_TOOLTIPS_UP_TO = 400
#: Above this many ordinary points in a group, the group is drawn as a density map (size, readability).
_DENSITY_ABOVE = 2000
#: Figure width in inches (72 SVG units per inch).
WIDTH = 7.2
#: Rough width of one 8 pt character in inches, to size label margins.
CHAR_IN = 0.075


def _colour(key: str | None) -> str:
    return COLOURS.get(key or "none", COLOURS["none"])


def margins(fig: Any, *, left: float, right: float, bottom: float, top: float) -> None:
    """Margins in inches (fixed layout: much faster than constrained layout, and labels are measured)."""
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height)


def domain(values: Sequence[Any], pad: float = 0.05) -> tuple[float, float]:
    numbers = [float(v) for v in values if finite(v)]
    if not numbers:
        return 0.0, 1.0
    low, high = min(numbers), max(numbers)
    if high - low < 1e-9:
        low, high = low - 0.5, high + 0.5
    span = high - low
    return low - pad * span, high + pad * span


def _plain_log_axis(axis: Any) -> None:
    """Log ticks as plain numbers (the default formatter writes mathtext, which is not parsed here), no minor ticks."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_locator(NullLocator())  # minor ticks cost time and add nothing readable here


# ------------------------------------------------------------------------------------ interval (forest)
@dataclass
class IntervalRow:
    """One row of an interval chart: a point estimate, its interval, its verdict and its threshold."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    state: str = "none"
    threshold: float | None = None
    tooltip: str = ""

    def tip(self) -> str:
        """The row's tooltip (its label, value and interval unless one was given)."""
        return self.tooltip or f"{self.label}: {fmt(self.value)} {_interval_text(self)}"


def _interval_text(row: IntervalRow) -> str:
    return f"[{fmt(row.low)}, {fmt(row.high)}]" if finite(row.low) and finite(row.high) else "no interval"


def interval_chart(rows: Sequence[IntervalRow], *, title: str, x_label: str,
                   threshold_label: str = "threshold") -> str:
    """Point estimates with intervals, one row each (a forest plot), top to bottom in the given order.

    The threshold is one dashed red line when every row shares it, else a red tick on each row; the value
    and interval are written at the right of each row ("undefined" without a value).

    Examples
    --------
    >>> svg = interval_chart([IntervalRow("a", 0.9, 0.85, 0.95, "pass", 0.8), IntervalRow("b", None)],
    ...                      title="t", x_label="x")
    >>> svg.count('class="mark point"'), svg.count('class="mark ci"'), "undefined" in svg
    (1, 1, True)
    """
    label_in = min(max((len(shorten(r.label)) for r in rows), default=4) * CHAR_IN + 0.2, 2.6)
    height = 0.8 + 0.24 * max(len(rows), 1)

    def paint(chart: Chart) -> None:
        fig = chart.figure
        margins(fig, left=label_in, right=1.55, bottom=0.5, top=0.2)
        ax = fig.add_subplot()
        _intervals(chart, ax, rows, threshold_label)
        ax.set_xlabel(x_label)

    return draw("intervals", title, (WIDTH, height), paint)


def _intervals(chart: Chart, ax: Any, rows: Sequence[IntervalRow], threshold_label: str) -> None:
    values = [v for r in rows for v in (r.value, r.low, r.high, r.threshold)]
    low, high = domain([*values, 0.0])
    ax.set_xlim(low, high)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)), [shorten(r.label) for r in rows])
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="y", visible=False)
    if low < 0.0 < high:
        chart.tag(ax.axvline(0.0, color=COLOURS["muted"], lw=0.8, ls=(0, (2, 3))), "zero")
    thresholds = {r.threshold for r in rows if finite(r.threshold)}
    if len(thresholds) == 1 and all(finite(r.threshold) for r in rows):
        value = thresholds.pop()
        chart.tag(ax.axvline(value, color=COLOURS["reject"], lw=1.3, ls=(0, (6, 3))), "threshold")
        chart.tag(ax.text(value, -0.5, f" {threshold_label}", color=COLOURS["reject"], fontsize=7.5,
                          va="bottom"), "threshold-label")
    elif thresholds:
        marked = [(float(r.threshold), i) for i, r in enumerate(rows) if finite(r.threshold)]
        chart.tag(ax.plot([x for x, _ in marked], [i for _, i in marked], ls="none", marker="|", ms=13,
                          mew=1.6, color=COLOURS["reject"])[0], "threshold")
    for state in dict.fromkeys(r.state for r in rows):
        ci = [(i, r) for i, r in enumerate(rows) if r.state == state and finite(r.low) and finite(r.high)]
        if ci:
            lines = ax.hlines([i for i, _ in ci], [r.low for _, r in ci], [r.high for _, r in ci],
                              colors=_colour(state), lw=2.6, capstyle="round")
            chart.mark(lines, "ci", len(ci), tooltips=[r.tip() for _, r in ci])
        dots = [(i, r) for i, r in enumerate(rows) if r.state == state and finite(r.value)]
        if dots:
            line = ax.plot([r.value for _, r in dots], [i for i, _ in dots], ls="none", marker="o", ms=6.5,
                           color=_colour(state))[0]
            chart.mark(line, "point", len(dots), tooltips=[r.tip() for _, r in dots])
    side = ax.get_yaxis_transform()
    for i, r in enumerate(rows):
        text = f"{fmt(r.value)} {_interval_text(r)}".replace(" no interval", "") if finite(r.value) else "undefined"
        ax.text(1.02, i, text, transform=side, va="center", fontsize=7.5,
                color=COLOURS["text"] if finite(r.value) else COLOURS["muted"])


def group_chart(labels: Sequence[str], series: Mapping[str, Sequence[IntervalRow]], *, title: str,
                x_label: str) -> str:
    """Several estimates per row (e.g. IRR crowd, IRR trusted and κx per question), offset and coloured.

    ``series`` maps a legend name to one :class:`IntervalRow` per label (its ``state`` names the colour).

    Examples
    --------
    >>> svg = group_chart(["a", "b"], {"IRR crowd": [IntervalRow("a", 0.5, 0.4, 0.6, "crowd"),
    ...                                              IntervalRow("b", None, state="crowd")]}, title="t", x_label="x")
    >>> svg.count('class="mark point"'), 'data-marks="2"' in svg
    (1, True)
    """
    label_in = min(max((len(shorten(str(q))) for q in labels), default=4) * CHAR_IN + 0.2, 2.6)
    height = 1.0 + 0.3 * max(len(labels), 1)

    def paint(chart: Chart) -> None:
        fig = chart.figure
        margins(fig, left=label_in, right=0.3, bottom=0.5, top=0.45)
        ax = fig.add_subplot()
        values = [v for rows in series.values() for r in rows for v in (r.value, r.low, r.high)]
        ax.set_xlim(*domain([*values, 0.0]))
        ax.set_ylim(len(labels) - 0.5, -0.5)
        ax.set_yticks(range(len(labels)), [shorten(str(q)) for q in labels])
        ax.tick_params(axis="y", length=0)
        ax.grid(axis="y", visible=False)
        offsets = [0.0] if len(series) == 1 else [(k / (len(series) - 1) - 0.5) * 0.5 for k in range(len(series))]
        handles = []
        for offset, (name, rows) in zip(offsets, series.items(), strict=True):
            colour = _colour(rows[0].state if rows else None)
            ci = [(i + offset, r) for i, r in enumerate(rows) if finite(r.low) and finite(r.high)]
            if ci:
                lines = ax.hlines([y for y, _ in ci], [r.low for _, r in ci], [r.high for _, r in ci],
                                  colors=colour, lw=2.0, alpha=0.8)
                chart.mark(lines, "ci", len(ci), tooltips=[r.tip() for _, r in ci])
            dots = [(i + offset, r) for i, r in enumerate(rows) if finite(r.value)]
            if dots:
                line = ax.plot([r.value for _, r in dots], [y for y, _ in dots], ls="none", marker="o", ms=5,
                               color=colour, label=name)[0]
                chart.mark(line, "point", len(dots), tooltips=[r.tip() for _, r in dots])
                handles.append(line)
        if handles:
            ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.0), ncols=len(handles),
                      borderaxespad=0.2)
        ax.set_xlabel(x_label)

    return draw("groups", title, (WIDTH, height), paint)


# ------------------------------------------------------------------------------------------- triangle
def triangle_chart(crowd: IntervalRow, trusted: IntervalRow, cross: IntervalRow, normalized: IntervalRow,
                   *, title: str, names: tuple[str, str] = ("crowd", "trusted")) -> str:
    r"""The xRR triangle (xRR paper Fig. 4–6) and, beside it, the same four estimates as intervals.

    The two pools are nodes holding their IRR; the solid edge between them is the cross-replication
    :math:`\kappa_x` (thicker when higher); the apex holds :math:`\kappa_x / \sqrt{IRR_{crowd} IRR_{trusted}}`
    with its minimum, outlined in its verdict's colour.

    Examples
    --------
    >>> row = IntervalRow("IRR", 0.44, 0.40, 0.48)
    >>> svg = triangle_chart(row, row, IntervalRow("κx", 0.42, 0.39, 0.45),
    ...                      IntervalRow("normalized κx", 0.99, 0.95, 1.04, "pass", 0.8), title="t")
    >>> svg.count('class="mark node"'), svg.count('class="mark edge"')
    (3, 1)
    """
    def paint(chart: Chart) -> None:
        from matplotlib.patches import Circle, FancyBboxPatch

        fig = chart.figure
        ax = fig.add_axes((0.0, 0.02, 0.5, 0.96))
        ax.set_xlim(0, 400)
        ax.set_ylim(0, 250)
        ax.set_aspect("equal")
        ax.set_axis_off()
        left, right, apex = (66.0, 66.0), (334.0, 66.0), (200.0, 196.0)
        for corner in (left, right):
            chart.tag(ax.plot([apex[0], corner[0]], [apex[1], corner[1]], color=COLOURS["muted"], lw=1,
                              ls=(0, (4, 3)))[0], "normalizer")
        width = 1.5 + 8.0 * max(0.0, min(1.0, float(cross.value))) if finite(cross.value) else 1.5
        edge = ax.plot([left[0] + 58, right[0] - 58], [left[1], right[1]], lw=width,
                       color=COLOURS["text"] if finite(cross.value) else COLOURS["muted"])[0]
        chart.mark(edge, "edge", tooltip=cross.tip())
        ax.text(200, left[1] + 12, f"κx {fmt(cross.value)}", ha="center", zorder=4, fontsize=9, fontweight="bold")
        ax.text(200, left[1] - 24, _interval_text(cross), ha="center", zorder=4, fontsize=7.5, color=COLOURS["muted"])
        for (x, y), row, name, pool in ((left, crowd, names[0], "crowd"), (right, trusted, names[1], "trusted")):
            chart.mark(ax.add_patch(Circle((x, y), 58, facecolor="white", edgecolor=COLOURS[pool], lw=2.5,
                                             zorder=3)),
                       "node", tooltip=row.tip())
            ax.text(x, y + 14, name, ha="center", zorder=4, fontsize=9, fontweight="bold")
            ax.text(x, y - 4, f"IRR {fmt(row.value)}", ha="center", zorder=4, fontsize=8.5)
            ax.text(x, y - 22, _interval_text(row), ha="center", zorder=4, fontsize=7, color=COLOURS["muted"])
        box = FancyBboxPatch((apex[0] - 86, apex[1] - 30), 172, 64, boxstyle="round,pad=0,rounding_size=10",
                             facecolor="white", edgecolor=_colour(normalized.state), lw=2.5, zorder=3)
        chart.mark(ax.add_patch(box), "node", tooltip=normalized.tip())
        ax.text(apex[0], apex[1] + 18, "normalized κx", ha="center", zorder=4, fontsize=7.5, color=COLOURS["muted"])
        ax.text(apex[0], apex[1] - 2, fmt(normalized.value), ha="center", zorder=4, fontsize=13, fontweight="bold")
        minimum = f" · min {fmt(normalized.threshold, 2)}" if finite(normalized.threshold) else ""
        ax.text(apex[0], apex[1] - 20, _interval_text(normalized) + minimum, ha="center", zorder=4, fontsize=7.5,
                color=COLOURS["muted"])
        side = fig.add_axes((0.64, 0.2, 0.17, 0.72))
        _intervals(chart, side, [crowd, trusted, cross, normalized], "minimum")
        side.set_xlabel("value")

    return draw("triangle", title, (WIDTH, 2.6), paint)


# -------------------------------------------------------------------------------------------- scatter
@dataclass
class Point:
    """One scatter point with optional intervals; ``callout`` is a short key (e.g. a rank) drawn beside it."""

    x: float | None
    y: float | None
    x_low: float | None = None
    x_high: float | None = None
    y_low: float | None = None
    y_high: float | None = None
    label: str = ""
    tooltip: str = ""
    highlight: bool = False
    group: str = "none"
    callout: str = ""

    def tip(self) -> str:
        """The point's tooltip."""
        return self.tooltip or f"{self.label}: ({fmt(self.x)}, {fmt(self.y)})"


def scatter_chart(points: Sequence[Point], *, title: str, x_label: str, y_label: str, log_x: bool = False,
                  diagonal: bool = False, all_intervals: bool = False, names: Mapping[str, str] | None = None,
                  highlight_name: str = "flagged", callout_title: str = "",
                  y_range: tuple[float, float] | None = None) -> str:
    """A scatter that stays readable with thousands of points and hundreds of highlighted ones.

    Ordinary points are translucent dots coloured by ``group`` (legend names from ``names``), without labels;
    highlighted points are red and drawn on top; at most :data:`MAX_LABELS` points with a ``callout`` key get
    that key beside them, their intervals, and their label in a key column right of the axes
    (``callout_title`` above it), so the number of labels does not grow with the data.
    ``all_intervals`` draws every point's intervals (for a few points only). Points without finite x and y
    (or x ≤ 0 on a log axis) are not drawn. Every highlighted point keeps its tooltip; ordinary points keep
    theirs up to 400 per group, and a group of more than 2 000 is drawn as a hexagonal density map.

    The axes span the points and the intervals drawn (a point's interval is drawn when it is called out, or with
    ``all_intervals``), so the wide intervals of a thousand raters with few items do not squash the points;
    ``y_range`` bounds the y axis to the statistic's own range (κ: −1 to 1) — an interval reaching past it is cut
    at the axis.

    Examples
    --------
    >>> pts = [Point(1, 0.5, label="a"), Point(10, 0.2, label="<b>", highlight=True, callout="1"),
    ...        Point(None, 1)]
    >>> svg = scatter_chart(pts, title="t", x_label="n", y_label="κ", log_x=True)
    >>> svg.count('class="mark cloud"'), svg.count('class="mark point highlight"'), 'data-marks="2"' in svg
    (1, 1, True)
    >>> "&lt;b&gt;" in svg and "<b>" not in svg
    True
    """
    drawn = [p for p in points if finite(p.x) and finite(p.y) and (not log_x or float(p.x) > 0)]
    callouts = sorted((p for p in drawn if p.callout), key=lambda p: sort_key(p.callout))[:MAX_LABELS]
    label_in = max((len(shorten(p.label, 22)) + 3 for p in [*callouts, Point(0, 0, label=callout_title)]),
                   default=0) * CHAR_IN + 0.4

    def paint(chart: Chart) -> None:
        fig = chart.figure
        margins(fig, left=0.7, right=label_in if callouts else 0.25, bottom=0.5, top=0.35)
        ax = fig.add_subplot()
        whiskered = drawn if all_intervals else callouts
        xs = [p.x for p in drawn] + [v for p in whiskered for v in (p.x_low, p.x_high)]
        ys = [p.y for p in drawn] + [v for p in whiskered for v in (p.y_low, p.y_high)]
        x_dom, y_dom = _log_domain(xs) if log_x else domain(xs), domain(ys)
        if y_range is not None:
            pad = 0.05 * (y_range[1] - y_range[0])
            y_dom = (max(y_dom[0], y_range[0] - pad), min(y_dom[1], y_range[1] + pad))
        if diagonal:
            x_dom = y_dom = (min(x_dom[0], y_dom[0]), max(x_dom[1], y_dom[1]))
            chart.tag(ax.plot(x_dom, y_dom, color=COLOURS["muted"], lw=1, ls=(0, (4, 3)))[0], "diagonal")
        if log_x:
            ax.set_xscale("log")
            _plain_log_axis(ax.xaxis)
        ax.set_xlim(*x_dom)
        ax.set_ylim(*y_dom)
        handles = [*_clouds(chart, ax, [p for p in drawn if not p.highlight], names or {}, x_dom, y_dom, log_x)]
        flagged = [p for p in drawn if p.highlight]
        _whiskers(chart, ax, whiskered)
        if flagged:
            line = ax.plot([p.x for p in flagged], [p.y for p in flagged], ls="none", marker="o",
                           ms=5.5 if len(flagged) <= 50 else 4.5, color=COLOURS["reject"], mec="white", mew=0.6,
                           alpha=0.9 if len(flagged) <= 50 else 0.7, label=f"{highlight_name} ({len(flagged):,})")
            chart.mark(line[0], "point highlight", len(flagged), tooltips=[p.tip() for p in flagged])
            handles.append(line[0])
        _callouts(chart, ax, callouts, callout_title)
        if len(handles) > 1 or flagged:
            ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.0), ncols=len(handles),
                      borderaxespad=0.2, handletextpad=0.3, columnspacing=1.2)
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        if not drawn:
            ax.text(0.5, 0.5, "no point to draw", transform=ax.transAxes, ha="center", color=COLOURS["muted"])

    return draw("scatter", title, (WIDTH, 3.9), paint)


def _log_domain(values: Sequence[Any]) -> tuple[float, float]:
    positive = [float(v) for v in values if finite(v) and v > 0]
    if not positive:
        return 1.0, 10.0
    low, high = min(positive), max(positive)
    return low / 1.4, high * 1.4


def _clouds(chart: Chart, ax: Any, points: Sequence[Point], names: Mapping[str, str],
            x_dom: tuple[float, float], y_dom: tuple[float, float], log_x: bool) -> list[Any]:
    """Ordinary points per group: translucent dots (the more points, the more transparent), or above 2 000
    points a hexagonal density map in the group's colour (darker: more points), which keeps the figure small
    and shows where the mass is, which overlapping dots cannot."""
    handles = []
    for group in dict.fromkeys(p.group for p in points):
        mine = [p for p in points if p.group == group]
        name = f"{names.get(group, group)} ({len(mine):,})"
        if len(mine) > _DENSITY_ABOVE:
            handles.append(_density(chart, ax, mine, _colour(group), f"{name}, darker: more", x_dom, y_dom, log_x))
            continue
        alpha = max(0.18, min(0.85, 7.0 / math.sqrt(len(mine))))
        line = ax.plot([p.x for p in mine], [p.y for p in mine], ls="none", marker="o",
                       ms=4.5 if len(mine) <= 200 else 3.5, mew=0, alpha=alpha, color=_colour(group), label=name)[0]
        tips = [p.tip() for p in mine] if len(mine) <= _TOOLTIPS_UP_TO else []
        chart.mark(line, "cloud", len(mine), tooltip="" if tips else f"{name}: too many for one tooltip each",
                   tooltips=tips)
        handles.append(line)
    return handles


def _density(chart: Chart, ax: Any, points: Sequence[Point], colour: str, name: str, x_dom: tuple[float, float],
             y_dom: tuple[float, float], log_x: bool) -> Any:
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.patches import Patch

    x0, x1 = (math.log10(x_dom[0]), math.log10(x_dom[1])) if log_x else x_dom
    cells = ax.hexbin([p.x for p in points], [p.y for p in points], gridsize=(60, 24), mincnt=1, bins="log",
                      xscale="log" if log_x else "linear", extent=(x0, x1, *y_dom), linewidths=0,
                      cmap=LinearSegmentedColormap.from_list("density", ["#d0e2f7", colour]))
    chart.mark(cells, "cloud density", len(points), tooltip=f"{name}: {len(points):,} points as a density map")
    return Patch(color=colour, label=name)  # the legend's swatch (a collection would show the default colour)


def _whiskers(chart: Chart, ax: Any, points: Sequence[Point]) -> None:
    vertical = [p for p in points if finite(p.y_low) and finite(p.y_high)]
    if vertical:
        chart.tag(ax.vlines([p.x for p in vertical], [p.y_low for p in vertical], [p.y_high for p in vertical],
                            colors=[_colour("reject" if p.highlight else p.group) for p in vertical], lw=1.2,
                            alpha=0.7), "whisker")
    horizontal = [p for p in points if finite(p.x_low) and finite(p.x_high)]
    if horizontal:
        chart.tag(ax.hlines([p.y for p in horizontal], [p.x_low for p in horizontal],
                            [p.x_high for p in horizontal],
                            colors=[_colour("reject" if p.highlight else p.group) for p in horizontal], lw=1.2,
                            alpha=0.7), "whisker")


def _callouts(chart: Chart, ax: Any, points: Sequence[Point], title: str) -> None:
    """A short key beside each point, and a column right of the axes listing each key with its full label.

    Keys are one or two characters, placed on the first side of their dot (right, left, below, above) where
    they cover no other key; the long labels sit in the column in key order, never over the data.
    """
    if not points:
        return
    placed: list[tuple[float, float, float, float]] = []
    for p in points:  # beside the dot, on the first side where it covers no key already placed
        px, py = ax.transData.transform((p.x, p.y))  # points: the figures use 72 dpi
        width, height = 4.8 * len(p.callout) + 1, 8.0
        for dx, dy in ((3, 1), (-3 - width, 1), (3, -1 - height), (-3 - width, -1 - height), (3, 2 + height),
                       (-3 - width, 2 + height)):
            box = (px + dx, py + dy, px + dx + width, py + dy + height)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                break
        placed.append(box)
        chart.tag(ax.annotate(p.callout, xy=(p.x, p.y), xytext=(dx, dy), textcoords="offset points", va="bottom",
                              fontsize=7.5, fontweight="bold", color=COLOURS["text"], annotation_clip=False),
                  "callout")
    chart.tag(ax.text(1.03, 1.0, title, transform=ax.transAxes, va="top", fontsize=7.5, color=COLOURS["muted"]),
              "callout-title")
    for k, p in enumerate(points):
        chart.tag(ax.text(1.03, 0.92 - 0.075 * k, f"{p.callout}  {shorten(p.label, 22)}", transform=ax.transAxes,
                          va="top", fontsize=7.5, color=COLOURS["text"]), "callout-key")


# ----------------------------------------------------------------------------------------------- bars
def bar_chart(groups: Mapping[str, Mapping[Any, int]], *, title: str, x_label: str, y_label: str) -> str:
    """Grouped bars: one group per category key (e.g. ratings per item), one bar per series (e.g. pool).

    Examples
    --------
    >>> svg = bar_chart({"crowd": {3: 10, 5: 2}, "trusted": {3: 7}}, title="t", x_label="k", y_label="items")
    >>> svg.count('class="mark bar"')
    3
    """
    keys = sorted({k for counts in groups.values() for k in counts}, key=sort_key)

    def paint(chart: Chart) -> None:
        fig = chart.figure
        margins(fig, left=0.7, right=0.25, bottom=0.5, top=0.35)
        ax = fig.add_subplot()
        width = 0.8 / max(len(groups), 1)
        for j, (name, counts) in enumerate(groups.items()):
            colour = COLOURS.get(name) or ("#0969da", "#8250df", "#bf8700", "#1a7f37")[j % 4]
            bars = [(i, key, float(value)) for i, key in enumerate(keys)
                    if finite(value := counts.get(key)) and value > 0]
            if not bars:
                continue
            drawn = ax.bar([i - 0.4 + width * (j + 0.5) for i, _, _ in bars], [v for _, _, v in bars], width * 0.92,
                           color=colour, label=name)
            for patch, (_, key, height) in zip(drawn.patches, bars, strict=True):
                chart.mark(patch, "bar", tooltip=f"{name}: {height:,.0f} items with {key}")
        step = max(1, math.ceil(len(keys) / 30))
        ax.set_xticks(range(0, len(keys), step), [shorten(str(k), 6) for k in keys[::step]])
        ax.set_xlim(-0.6, len(keys) - 0.4)
        ax.grid(axis="x", visible=False)
        ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncols=max(len(groups), 1), borderaxespad=0.2)
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)

    return draw("bars", title, (WIDTH, 2.7), paint)


def sort_key(key: Any) -> tuple[int, float, str]:
    try:
        return 0, float(key), ""
    except (TypeError, ValueError):
        return 1, 0.0, str(key)
