"""Inline SVG charts for the LabelGate HTML reports: no JavaScript, no network, every text escaped.

The charts are written as SVG text directly (no plotting library): a gate report holds several charts per
question, and 50 questions must render in well under a few seconds (see ``docs/reports.md`` for the
measurements and the comparison with matplotlib). Conventions:

- every text that reaches the SVG (labels, tooltips, titles) goes through :func:`escape`;
- every drawn data item carries the class ``mark`` (plus a kind: ``point``, ``ci``, ``bar``, ``band``,
  ``line``, ``episode``, ``edge``, ``node``, ``cloud``) and usually a ``<title>`` child, which browsers show
  as a tooltip; the root ``<svg>`` has ``data-marks`` = the number of data items it draws, so tests and
  readers can check that nothing was silently dropped;
- charts have a fixed coordinate system (``viewBox``) and scale down with the page (CSS ``max-width``).

Examples
--------
>>> svg = interval_chart([IntervalRow("q<1>", 0.7, 0.6, 0.8, state="reject", threshold=0.8)],
...                      title="normalized κx", x_label="value")
>>> svg.startswith("<svg") and "q&lt;1&gt;" in svg and "q<1>" not in svg
True
>>> svg.count('class="mark point'), svg.count('class="mark ci'), 'data-marks="2"' in svg
(1, 1, True)
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta  # noqa: F401 (doctests)
from typing import Any, TypeGuard

__all__ = [
    "COLOURS",
    "IntervalRow",
    "Point",
    "Series",
    "Span",
    "TimePoint",
    "bar_chart",
    "escape",
    "interval_chart",
    "nice_ticks",
    "scatter_chart",
    "time_series_chart",
    "triangle_chart",
]

#: Colours of verdicts and pools (GitHub Primer palette: readable on white, distinguishable in grey print).
COLOURS = {"pass": "#1a7f37", "reject": "#cf222e", "review": "#9a6700", "none": "#0969da",
           "crowd": "#0969da", "trusted": "#8250df", "muted": "#8c959f", "grid": "#d8dee4",
           "text": "#1f2328", "band": "#0969da", "baseline": "#bf8700", "change": "#cf222e"}
FONT = 12
#: Above this many ordinary points, a scatter draws them as one path of dots without tooltips.
MAX_POINTS = 400
# Average advance of a sans-serif glyph in em: used only to size label areas and to shorten long labels.
_CHAR_EM = 0.6
_LABEL_MAX = 32


def escape(value: Any) -> str:
    """Text for HTML/SVG content or a quoted attribute: ``& < > " '`` become entities.

    Examples
    --------
    >>> escape('<script>alert("x")</script> & \\'y\\'')
    '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;y&#x27;'
    """
    return html.escape(str(value), quote=True)


def finite(value: Any) -> TypeGuard[float]:
    """True for a real finite number (not a bool, not None, not NaN/inf); narrows the type for mypy."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fmt(value: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals, or an em dash when it is missing or not finite.

    Examples
    --------
    >>> fmt(0.12345), fmt(None), fmt(float("nan")), fmt(3, 1)
    ('0.123', '—', '—', '3.0')
    """
    return f"{value:.{digits}f}" if finite(value) else "—"


def shorten(text: str, limit: int = _LABEL_MAX) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (the full text goes into the tooltip)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def text_width(text: str, size: float = FONT) -> float:
    """Approximate rendered width in px of ``text`` in the report's sans-serif font."""
    return len(text) * size * _CHAR_EM


# ------------------------------------------------------------------------------------------------ scales
def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering ``[low, high]`` (steps 1, 2, 2.5 or 5 × 10^k).

    Examples
    --------
    >>> nice_ticks(-0.13, 1.04)
    [-0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.25]
    >>> nice_ticks(0.0, 0.0)
    [-1.0, 0.0, 1.0]
    """
    if not (finite(low) and finite(high)) or high <= low:
        centre = low if finite(low) else 0.0
        return [centre - 1.0, centre, centre + 1.0]
    step = _nice_step((high - low) / max(count, 1))
    first = math.floor(low / step + 1e-9) * step
    ticks, k = [], 0
    while first + k * step < high + step - 1e-9 * step:
        ticks.append(round(first + k * step, 12) + 0.0)  # + 0.0 turns -0.0 into 0.0
        k += 1
    return ticks


def _nice_step(raw: float) -> float:
    power = 10.0 ** math.floor(math.log10(raw))
    for mantissa in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= mantissa * power * (1 + 1e-9):
            return mantissa * power
    return 10.0 * power


def _tick_label(value: float, ticks: Sequence[float]) -> str:
    step = min((b - a for a, b in itertools.pairwise(ticks)), default=1.0)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step > 0 else 0
    decimals += 1 if step > 0 and round(step / 10.0 ** math.floor(math.log10(step)), 6) == 2.5 else 0
    return f"{value:.{decimals}f}"


@dataclass(frozen=True)
class Scale:
    """Map a data interval ``[low, high]`` onto pixels ``[start, end]`` (linearly, or in log10)."""

    low: float
    high: float
    start: float
    end: float
    log: bool = False

    def __call__(self, value: float) -> float:
        low, high, v = self.low, self.high, value
        if self.log:
            low, high, v = math.log10(low), math.log10(high), math.log10(max(value, self.low))
        share = 0.5 if high == low else (v - low) / (high - low)
        return self.start + share * (self.end - self.start)

    def ticks(self, count: int = 5) -> list[float]:
        """Tick values inside the domain."""
        if self.log:
            values = [m * 10.0 ** k for k in range(math.floor(math.log10(self.low)),
                                                     math.ceil(math.log10(self.high)) + 1) for m in (1, 2, 5)]
            inside = [v for v in values if self.low * (1 - 1e-9) <= v <= self.high * (1 + 1e-9)]
            return inside if len(inside) <= 8 else [v for v in inside if round(v / 10 ** math.floor(
                math.log10(v))) == 1]
        return [t for t in nice_ticks(self.low, self.high, count)
                if self.low - 1e-9 <= t <= self.high + 1e-9]

    def label(self, value: float, ticks: Sequence[float]) -> str:
        """The text of a tick."""
        if self.log:
            return f"{value:g}"
        return _tick_label(value, ticks)


def data_domain(values: Sequence[Any], include: Sequence[float] = (),
                pad: float = 0.04) -> tuple[float, float]:
    """A padded domain covering the finite ``values`` and ``include``, extended to round ticks."""
    numbers = [float(v) for v in (*values, *include) if finite(v)]
    if not numbers:
        return 0.0, 1.0
    low, high = min(numbers), max(numbers)
    if high == low:
        low, high = low - 0.5, high + 0.5
    span = high - low
    ticks = nice_ticks(low - pad * span, high + pad * span)
    return ticks[0], ticks[-1]


def log_domain(values: Sequence[Any]) -> tuple[float, float]:
    """A domain in powers of ten covering the positive ``values``."""
    positive = [float(v) for v in values if finite(v) and v > 0]
    if not positive:
        return 1.0, 10.0
    return 10.0 ** math.floor(math.log10(min(positive))), 10.0 ** math.ceil(math.log10(max(positive)) + 1e-12)


# ------------------------------------------------------------------------------------------------ canvas
def _num(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _attrs(attrs: Mapping[str, Any]) -> str:
    parts = []
    for key, value in attrs.items():
        if value is None:
            continue
        text = _num(value) if isinstance(value, float) else str(value)
        parts.append(f' {key}="{escape(text)}"')
    return "".join(parts)


class Canvas:
    """An SVG under construction: elements in drawing order and the count of data marks.

    Examples
    --------
    >>> c = Canvas(100, 50, "demo", "A <demo>")
    >>> c.mark("circle", {"cx": 1.0, "cy": 2.0, "r": 3}, kind="point", tooltip="id & 'x'")
    >>> c.text(5, 5, "<b>")
    >>> svg = c.render()
    >>> 'data-marks="1"' in svg and "&lt;b&gt;" in svg and "id &amp; &#x27;x&#x27;" in svg
    True
    """

    def __init__(self, width: float, height: float, kind: str, title: str) -> None:
        self.width, self.height, self.kind, self.title = width, height, kind, title
        self.parts: list[str] = []
        self.marks = 0

    def element(self, tag: str, attrs: Mapping[str, Any], tooltip: str | None = None) -> None:
        """Draw a non-data element (axis, grid, label background...)."""
        if tooltip:
            self.parts.append(f"<{tag}{_attrs(attrs)}><title>{escape(tooltip)}</title></{tag}>")
        else:
            self.parts.append(f"<{tag}{_attrs(attrs)}/>")

    def mark(self, tag: str, attrs: Mapping[str, Any], kind: str, tooltip: str | None = None,
             count: int = 1) -> None:
        """Draw ``count`` data items as one element with class ``mark <kind>``."""
        extra = f" {attrs['class']}" if attrs.get("class") else ""
        self.element(tag, {**attrs, "class": f"mark {kind}{extra}"}, tooltip)
        self.marks += count

    def text(self, x: float, y: float, text: str, anchor: str = "start", cls: str = "",
             size: float | None = None, rotate: bool = False, weight: str | None = None,
             tooltip: str | None = None) -> None:
        """Draw escaped ``text`` with its baseline at ``y`` (and an optional escaped tooltip)."""
        attrs = {"x": float(x), "y": float(y), "text-anchor": anchor if anchor != "start" else None,
                 "class": cls or None, "font-size": size, "font-weight": weight,
                 "transform": f"rotate(-90 {_num(x)} {_num(y)})" if rotate else None}
        tip = f"<title>{escape(tooltip)}</title>" if tooltip else ""
        self.parts.append(f"<text{_attrs(attrs)}>{escape(text)}{tip}</text>")

    def line(self, x1: float, y1: float, x2: float, y2: float, cls: str) -> None:
        """Draw a non-data line (axis, grid, threshold)."""
        self.element("line", {"x1": float(x1), "y1": float(y1), "x2": float(x2), "y2": float(y2),
                              "class": cls})

    def render(self) -> str:
        """The SVG element (to be inlined in HTML)."""
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="lg-chart lg-{escape(self.kind)}" '
                f'viewBox="0 0 {_num(self.width)} {_num(self.height)}" width="{_num(self.width)}" '
                f'height="{_num(self.height)}" role="img" aria-label="{escape(self.title)}" '
                f'data-marks="{self.marks}"><title>{escape(self.title)}</title>')
        return head + "".join(self.parts) + "</svg>"


def _x_axis(c: Canvas, scale: Scale, y: float, top: float, label: str, ticks: Sequence[float] | None = None,
            labels: Sequence[str] | None = None) -> None:
    ticks = list(scale.ticks() if ticks is None else ticks)
    for i, tick in enumerate(ticks):
        x = scale(tick)
        c.line(x, top, x, y, "grid")
        c.text(x, y + 14, labels[i] if labels else scale.label(tick, ticks), anchor="middle", cls="tick")
    c.line(scale.start, y, scale.end, y, "axis")
    if label:
        c.text((scale.start + scale.end) / 2, y + 30, label, anchor="middle", cls="axis-label")


def _y_axis(c: Canvas, scale: Scale, x: float, right: float, label: str) -> None:
    ticks = scale.ticks()
    for tick in ticks:
        y = scale(tick)
        c.line(x, y, right, y, "grid")
        c.text(x - 5, y + 4, scale.label(tick, ticks), anchor="end", cls="tick")
    c.line(x, scale.start, x, scale.end, "axis")
    if label:
        c.text(14, (scale.start + scale.end) / 2, label, anchor="middle", cls="axis-label", rotate=True)


def _colour(state: str | None) -> str:
    return COLOURS.get(state or "none", COLOURS["none"])


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


def interval_chart(rows: Sequence[IntervalRow], *, title: str, x_label: str, width: float = 720,
                   threshold_label: str = "threshold") -> str:
    """Point estimates with intervals, one row each (a forest plot), thresholds as red ticks or one line.

    Rows are drawn in the given order, top to bottom; a row without a finite value shows "not computed".
    When every row has the same threshold it is one dashed vertical line, otherwise a short tick per row.

    Examples
    --------
    >>> rows = [IntervalRow("a", 0.9, 0.85, 0.95, "pass", 0.8), IntervalRow("b", None)]
    >>> svg = interval_chart(rows, title="t", x_label="x")
    >>> svg.count('class="mark point'), svg.count('class="mark ci'), "not computed" in svg
    (1, 1, True)
    """
    label_w = min(max((text_width(shorten(r.label)) for r in rows), default=40) + 16, 260)
    value_w, row_h, top = 150, 22, 12
    height = top + row_h * max(len(rows), 1) + 44
    c = Canvas(width, height, "intervals", title)
    values = [v for r in rows for v in (r.value, r.low, r.high, r.threshold)]
    low, high = data_domain(values, include=(0.0,))
    scale = Scale(low, high, label_w, width - value_w)
    bottom = top + row_h * max(len(rows), 1)
    _x_axis(c, scale, bottom, top, x_label)
    if 0.0 >= low and 0.0 <= high:
        c.line(scale(0.0), top, scale(0.0), bottom, "zero")
    thresholds = {r.threshold for r in rows if finite(r.threshold)}
    shared = len(thresholds) == 1 and all(finite(r.threshold) for r in rows)
    if shared:
        x = scale(thresholds.pop())
        c.line(x, top - 4, x, bottom, "threshold")
        c.text(x + 3, top + 6, threshold_label, cls="threshold-label")
    for i, row in enumerate(rows):
        _interval_row(c, scale, row, top + i * row_h + row_h / 2, width, draw_threshold=not shared)
    return c.render()


def _interval_row(c: Canvas, scale: Scale, row: IntervalRow, y: float, width: float,
                  draw_threshold: bool) -> None:
    c.text(scale.start - 8, y + 4, shorten(row.label), anchor="end", cls="row-label", tooltip=row.label)
    if draw_threshold and finite(row.threshold):
        x = scale(float(row.threshold))
        c.line(x, y - 8, x, y + 8, "threshold")
    colour = _colour(row.state)
    tip = row.tooltip or f"{row.label}: {fmt(row.value)} [{fmt(row.low)}, {fmt(row.high)}]"
    if finite(row.low) and finite(row.high):
        c.mark("line", {"x1": scale(float(row.low)), "y1": y, "x2": scale(float(row.high)), "y2": y,
                        "stroke": colour}, kind="ci", tooltip=tip)
    if finite(row.value):
        c.mark("circle", {"cx": scale(float(row.value)), "cy": y, "r": 4.5, "fill": colour}, kind="point",
               tooltip=tip)
        interval = f" [{fmt(row.low)}, {fmt(row.high)}]" if finite(row.low) and finite(row.high) else ""
        c.text(scale.end + 10, y + 4, f"{fmt(row.value)}{interval}", cls="value")
    else:
        c.text(scale.end + 10, y + 4, "not computed", cls="value muted")


# ------------------------------------------------------------------------------------------- triangle
def triangle_chart(crowd: IntervalRow, trusted: IntervalRow, cross: IntervalRow, normalized: IntervalRow,
                   *, title: str, names: tuple[str, str] = ("crowd", "trusted")) -> str:
    r"""The xRR triangle (xRR paper Fig. 4–6): each pool's IRR, κx between them, normalized κx on top.

    The two pools are nodes holding their IRR; the solid edge between them is the cross-replication
    :math:`\kappa_x` (thicker when higher); the apex holds
    :math:`\kappa_x / \sqrt{IRR_{crowd} \, IRR_{trusted}}`, coloured by its verdict.

    Examples
    --------
    >>> row = IntervalRow("IRR", 0.44, 0.40, 0.48)
    >>> svg = triangle_chart(row, row, IntervalRow("κx", 0.42, 0.39, 0.45),
    ...                      IntervalRow("normalized κx", 0.99, 0.95, 1.04, "pass", 0.8), title="t")
    >>> svg.count('class="mark node'), svg.count('class="mark edge')
    (3, 1)
    """
    width, height = 400, 250
    c = Canvas(width, height, "triangle", title)
    left, right, apex = (78.0, 182.0), (322.0, 182.0), (200.0, 52.0)
    for corner in (left, right):
        c.line(apex[0], apex[1], corner[0], corner[1], "normalizer")
    edge_w = 1.5 + 8.0 * max(0.0, min(1.0, float(cross.value))) if finite(cross.value) else 1.5
    edge_colour = COLOURS["muted"] if not finite(cross.value) else COLOURS["text"]
    c.mark("line", {"x1": left[0] + 50, "y1": left[1], "x2": right[0] - 50, "y2": right[1],
                    "stroke": edge_colour, "stroke-width": round(edge_w, 1)}, kind="edge",
           tooltip=_row_tip(cross))
    c.text(200, left[1] - 10, f"κx {fmt(cross.value)}", anchor="middle", cls="edge-label", weight="600")
    c.text(200, left[1] + 22, _interval_text(cross), anchor="middle", cls="small")
    for (x, y), row, name, pool in ((left, crowd, names[0], "crowd"), (right, trusted, names[1], "trusted")):
        c.mark("circle", {"cx": x, "cy": y, "r": 48, "fill": "#fff", "stroke": COLOURS[pool],
                          "stroke-width": 3}, kind="node", tooltip=_row_tip(row))
        c.text(x, y - 14, name, anchor="middle", cls="node-name", weight="600")
        c.text(x, y + 4, f"IRR {fmt(row.value)}", anchor="middle")
        c.text(x, y + 20, _interval_text(row), anchor="middle", cls="small")
    colour = _colour(normalized.state)
    c.mark("rect", {"x": apex[0] - 86, "y": apex[1] - 38, "width": 172, "height": 64, "rx": 10,
                    "fill": "#fff", "stroke": colour, "stroke-width": 3}, kind="node",
           tooltip=_row_tip(normalized))
    c.text(apex[0], apex[1] - 18, "normalized κx", anchor="middle", cls="small")
    c.text(apex[0], apex[1] + 2, fmt(normalized.value), anchor="middle", size=18, weight="700")
    threshold = f" · min {fmt(normalized.threshold, 2)}" if finite(normalized.threshold) else ""
    c.text(apex[0], apex[1] + 18, _interval_text(normalized) + threshold, anchor="middle", cls="small")
    return c.render()


def _interval_text(row: IntervalRow) -> str:
    return f"[{fmt(row.low)}, {fmt(row.high)}]" if finite(row.low) and finite(row.high) else "no interval"


def _row_tip(row: IntervalRow) -> str:
    return row.tooltip or f"{row.label}: {fmt(row.value)} {_interval_text(row)}"


# -------------------------------------------------------------------------------------------- scatter
@dataclass
class Point:
    """One scatter point with optional intervals in x and y."""

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


def scatter_chart(points: Sequence[Point], *, title: str, x_label: str, y_label: str, log_x: bool = False,
                  diagonal: bool = False, y_line: float | None = None, y_line_label: str = "",
                  max_points: int = MAX_POINTS, all_intervals: bool = False, width: float = 720,
                  height: float = 380) -> str:
    """A scatter plot; highlighted points are red, labelled and drawn last (on top) with their intervals.

    ``all_intervals`` draws the intervals (whiskers) of every point, not only of the highlighted ones.

    Points without finite x and y are not drawn. When more than ``max_points`` ordinary points remain, they
    are drawn as one compact path of dots (class ``mark cloud``, ``data-n`` = their number) without
    per-point tooltips, which keeps a report with thousands of raters small; highlighted points always
    keep their own element and tooltip.

    Examples
    --------
    >>> pts = [Point(1, 0.5, label="a"), Point(10, 0.2, label="<b>", highlight=True), Point(None, 1)]
    >>> svg = scatter_chart(pts, title="t", x_label="n", y_label="κ", log_x=True)
    >>> svg.count('class="mark point'), 'data-marks="2"' in svg, "&lt;b&gt;" in svg
    (2, True, True)
    """
    drawn = [p for p in points if finite(p.x) and finite(p.y) and (not log_x or float(p.x) > 0)]
    left, bottom_pad, top, right = 64.0, 48.0, 14.0, 24.0
    c = Canvas(width, height, "scatter", title)
    xs = [v for p in drawn for v in (p.x, p.x_low, p.x_high)]
    ys = [v for p in drawn for v in (p.y, p.y_low, p.y_high)] + ([y_line] if finite(y_line) else [])
    x_dom = log_domain(xs) if log_x else data_domain(xs)
    y_dom = data_domain(ys)
    if diagonal:
        x_dom = y_dom = (min(x_dom[0], y_dom[0]), max(x_dom[1], y_dom[1]))
    sx = Scale(x_dom[0], x_dom[1], left, width - right, log=log_x)
    sy = Scale(y_dom[0], y_dom[1], height - bottom_pad, top)
    _x_axis(c, sx, height - bottom_pad, top, x_label)
    _y_axis(c, sy, left, width - right, y_label)
    if diagonal:
        c.line(sx(x_dom[0]), sy(x_dom[0]), sx(x_dom[1]), sy(x_dom[1]), "diagonal")
    if finite(y_line):
        c.line(left, sy(float(y_line)), width - right, sy(float(y_line)), "threshold")
        c.text(width - right - 4, sy(float(y_line)) - 4, y_line_label, anchor="end", cls="threshold-label")
    ordinary = [p for p in drawn if not p.highlight]
    if len(ordinary) > max_points:
        _cloud(c, ordinary, sx, sy)
    else:
        for p in ordinary:
            _scatter_point(c, p, sx, sy, all_intervals)
    for p in (p for p in drawn if p.highlight):
        _scatter_point(c, p, sx, sy, True)
    if not drawn:
        c.text(width / 2, height / 2, "no point to draw", anchor="middle", cls="muted")
    return c.render()


def _scatter_point(c: Canvas, p: Point, sx: Scale, sy: Scale, whiskers: bool) -> None:
    colour = COLOURS["reject"] if p.highlight else _colour(p.group)
    x, y = sx(float(p.x)), sy(float(p.y))  # type: ignore[arg-type]
    tip = p.tooltip or f"{p.label}: ({fmt(p.x)}, {fmt(p.y)})"
    if whiskers and finite(p.y_low) and finite(p.y_high):
        c.element("line", {"x1": x, "y1": sy(float(p.y_low)), "x2": x, "y2": sy(float(p.y_high)),
                           "stroke": colour, "class": "whisker"})
    if whiskers and finite(p.x_low) and finite(p.x_high):
        c.element("line", {"x1": sx(float(p.x_low)), "y1": y, "x2": sx(float(p.x_high)), "y2": y,
                           "stroke": colour, "class": "whisker"})
    c.mark("circle", {"cx": x, "cy": y, "r": 5 if p.highlight else 3.5, "fill": colour,
                      "class": "highlight" if p.highlight else None}, kind="point", tooltip=tip)
    if p.highlight and p.label:
        c.text(x + 7, y - 6, shorten(p.label, 24), cls="point-label")


def _cloud(c: Canvas, points: Sequence[Point], sx: Scale, sy: Scale) -> None:
    """Many points as one path of round dots: whole pixels, duplicates once, relative moves (small)."""
    pixels = sorted({(round(sx(float(p.x))), round(sy(float(p.y)))) for p in points})  # type: ignore[arg-type]
    c.mark("path", {"d": dots_path(pixels), "stroke": COLOURS["none"], "stroke-width": 5,
                    "stroke-linecap": "round", "stroke-opacity": 0.55, "fill": "none", "data-n": len(points),
                    "data-dots": len(pixels)}, kind="cloud",
           tooltip=f"{len(points)} points (too many for one tooltip each)", count=len(points))


def dots_path(pixels: Sequence[tuple[int, int]]) -> str:
    """SVG path data drawing a zero-length segment (a dot, with round caps) at each pixel.

    Examples
    --------
    >>> dots_path([(10, 20), (12, 18), (12, 25)])
    'M10 20h0m2 -2h0m0 7h0'
    """
    if not pixels:
        return ""
    (x0, y0), parts = pixels[0], [f"M{pixels[0][0]} {pixels[0][1]}h0"]
    for x, y in pixels[1:]:
        parts.append(f"m{x - x0} {y - y0}h0")
        x0, y0 = x, y
    return "".join(parts)


# ---------------------------------------------------------------------------------------- time series
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
    """A line with an optional interval band."""

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


@dataclass
class _TimeScale:
    scale: Scale
    ticks: list[float] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)


def _epoch(t: datetime) -> float:
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


_SECONDS, _MINUTES, _HOURS, _DAYS = "%H:%M:%S", "%H:%M", "%m-%d %H:%M", "%Y-%m-%d"
_UNITS = [(1, _SECONDS), (5, _SECONDS), (15, _SECONDS), (30, _SECONDS), (60, _MINUTES), (300, _MINUTES),
          (900, _MINUTES), (1800, _MINUTES), (3600, _HOURS), (3 * 3600, _HOURS), (6 * 3600, _HOURS),
          (12 * 3600, _HOURS), (86400, _DAYS), (2 * 86400, _DAYS), (7 * 86400, _DAYS), (14 * 86400, _DAYS),
          (30 * 86400, _DAYS), (91 * 86400, _DAYS), (365 * 86400, "%Y")]


def time_scale(times: Sequence[datetime], start: float, end: float) -> _TimeScale:
    """A linear scale over UTC instants (3 % padding) with ticks on round seconds to years (2 to 9 ticks).

    Below a day the first tick also shows the date.

    Examples
    --------
    >>> ts = time_scale([datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 8, tzinfo=UTC)], 0, 100)
    >>> ts.labels[0], len(ts.labels)
    ('2024-01-01', 8)
    >>> t = datetime(2024, 1, 1, 8, 38, 18, tzinfo=UTC)
    >>> time_scale([t, t + timedelta(seconds=4)], 0, 100).labels[:2]
    ['2024-01-01 08:38:00', '08:38:15']
    """
    epochs = [_epoch(t) for t in times] or [0.0]
    low, high = min(epochs), max(epochs)
    if high - low < 60:  # one instant or a few seconds: a one-minute frame around them
        centre = (low + high) / 2
        low, high = centre - 30, centre + 30
    pad = 0.03 * (high - low)
    low, high = low - pad, high + pad
    unit, pattern = next(((u, p) for u, p in _UNITS if (high - low) / u <= 8), _UNITS[-1])
    first = math.ceil(low / unit) * unit
    ticks = [float(first + k * unit) for k in range(int((high - first) // unit) + 1)]
    labels = [datetime.fromtimestamp(t, UTC).strftime(pattern) for t in ticks]
    if labels and unit < 86400:
        dated = "%Y-%m-%d " + pattern.removeprefix("%m-%d ")
        labels[0] = datetime.fromtimestamp(ticks[0], UTC).strftime(dated)
    return _TimeScale(Scale(low, high, start, end), ticks, labels)


def time_series_chart(series: Sequence[Series], *, title: str, y_label: str,
                      thresholds: Sequence[tuple[datetime, float]] = (), spans: Sequence[Span] = (),
                      width: float = 720, height: float = 300) -> str:
    """Values over time with interval bands, threshold steps and shaded episodes.

    Marks: one ``band`` per series with ``band`` set and at least one interval, one ``line`` per series with
    two or more finite points, one ``point`` (with its tooltip) per finite window of a series with
    ``markers`` set, one ``episode`` per span. Several series get a legend (dashed swatches for dashed
    series).

    Examples
    --------
    >>> t0 = datetime(2024, 1, 1, tzinfo=UTC)
    >>> pts = [TimePoint(t0 + timedelta(days=d), 0.8 - d / 20, 0.7 - d / 20, 0.9 - d / 20) for d in range(5)]
    >>> svg = time_series_chart([Series("window", pts)], title="t", y_label="κ",
    ...                         thresholds=[(t0, 0.7)], spans=[Span(t0 + timedelta(days=3), None)])
    >>> [svg.count(f'class="mark {k}') for k in ("band", "line", "point", "episode")]
    [1, 1, 5, 1]
    """
    left, bottom_pad, right = 64.0, 48.0, 24.0
    top = 30.0 if len(series) > 1 else 14.0
    c = Canvas(width, height, "timeseries", title)
    times = [p.t for s in series for p in s.points] + [s.start for s in spans] + [
        s.end for s in spans if s.end is not None]
    ts = time_scale(times, left, width - right)
    ys = [v for s in series for p in s.points for v in (p.value, p.low, p.high)] + [v for _, v in thresholds]
    sy = Scale(*data_domain(ys), height - bottom_pad, top)
    for span in spans:
        _episode(c, span, ts.scale, top, height - bottom_pad)
    _x_axis(c, ts.scale, height - bottom_pad, top, "", ticks=ts.ticks, labels=ts.labels)
    _y_axis(c, sy, left, width - right, y_label)
    _threshold_steps(c, thresholds, ts.scale, sy)
    for s in series:
        _series(c, s, ts.scale, sy)
    if len(series) > 1:
        _legend(c, series, left)
    if not any(finite(p.value) for s in series for p in s.points):
        c.text(width / 2, height / 2, "no window with a value", anchor="middle", cls="muted")
    return c.render()


def _legend(c: Canvas, series: Sequence[Series], left: float) -> None:
    x = left
    for s in series:
        c.element("line", {"x1": x, "y1": 12.0, "x2": x + 22, "y2": 12.0, "stroke": s.colour,
                           "stroke-width": 2, "stroke-dasharray": "6 4" if s.dashed else None})
        c.text(x + 27, 16, shorten(s.name, 28), cls="legend")
        x += 40 + text_width(shorten(s.name, 28), 11)


def _episode(c: Canvas, span: Span, sx: Scale, top: float, bottom: float) -> None:
    x0 = max(sx.start, sx(_epoch(span.start)))
    x1 = sx.end if span.end is None else min(sx.end, sx(_epoch(span.end)))
    colour = COLOURS.get(span.kind, COLOURS["change"])
    c.mark("rect", {"x": x0, "y": top, "width": max(x1 - x0, 2.0), "height": bottom - top, "fill": colour,
                    "fill-opacity": 0.12}, kind="episode", tooltip=span.tooltip or f"{span.kind} episode")


def _threshold_steps(c: Canvas, thresholds: Sequence[tuple[datetime, float]], sx: Scale, sy: Scale) -> None:
    steps = sorted(((_epoch(t), float(v)) for t, v in thresholds if finite(v)), key=lambda tv: tv[0])
    if not steps:
        return
    if len({v for _, v in steps}) == 1:
        y = sy(steps[0][1])
        c.line(sx.start, y, sx.end, y, "threshold")
        c.text(sx.start + 4, y - 4, f"threshold {fmt(steps[0][1], 2)}", cls="threshold-label")
        return
    path = [f"M{_num(sx.start)} {_num(sy(steps[0][1]))}"]
    for t, v in steps[1:]:
        path.append(f"H{_num(sx(t))}V{_num(sy(v))}")
    path.append(f"H{_num(sx.end)}")
    c.element("path", {"d": "".join(path), "class": "threshold", "fill": "none"})


def _series(c: Canvas, s: Series, sx: Scale, sy: Scale) -> None:
    pts = sorted((p for p in s.points if finite(p.value)), key=lambda p: _epoch(p.t))
    banded = [p for p in pts if finite(p.low) and finite(p.high)] if s.band else []
    if banded:
        upper = [(sx(_epoch(p.t)), sy(float(p.high))) for p in banded]  # type: ignore[arg-type]
        lower = [(sx(_epoch(p.t)), sy(float(p.low))) for p in reversed(banded)]  # type: ignore[arg-type]
        if len(banded) == 1:  # one window: a 4 px wide bar
            (x, y_high), (_, y_low) = upper[0], lower[0]
            upper, lower = [(x - 2, y_high), (x + 2, y_high)], [(x + 2, y_low), (x - 2, y_low)]
        d = "M" + "L".join(f"{_num(x)} {_num(y)}" for x, y in upper + lower) + "Z"
        c.mark("path", {"d": d, "fill": s.colour, "fill-opacity": 0.15, "stroke": "none"}, kind="band",
               tooltip=f"{s.name}: interval band")
    if len(pts) >= 2:
        d = "M" + "L".join(f"{_num(sx(_epoch(p.t)))} {_num(sy(float(p.value)))}" for p in pts)  # type: ignore[arg-type]
        c.mark("path", {"d": d, "fill": "none", "stroke": s.colour, "stroke-width": 2,
                        "stroke-dasharray": "6 4" if s.dashed else None}, kind="line", tooltip=s.name)
    for p in pts if s.markers else ():
        tip = p.tooltip or f"{s.name} {p.t.isoformat()}: {fmt(p.value)} [{fmt(p.low)}, {fmt(p.high)}]"
        c.mark("circle", {"cx": sx(_epoch(p.t)), "cy": sy(float(p.value)), "r": 3, "fill": s.colour},  # type: ignore[arg-type]
               kind="point", tooltip=tip)


# ----------------------------------------------------------------------------------------------- bars
def bar_chart(groups: Mapping[str, Mapping[Any, int]], *, title: str, x_label: str, y_label: str,
              width: float = 720, height: float = 260) -> str:
    """Grouped bars: one group per category key (e.g. ratings per item), one bar per series (e.g. pool).

    Examples
    --------
    >>> svg = bar_chart({"crowd": {3: 10, 5: 2}, "trusted": {3: 7}}, title="t", x_label="k", y_label="items")
    >>> svg.count('class="mark bar')
    3
    """
    keys = sorted({k for counts in groups.values() for k in counts}, key=_sort_key)
    left, bottom_pad, top, right = 64.0, 48.0, 24.0, 24.0
    c = Canvas(width, height, "bars", title)
    top_value = max((v for counts in groups.values() for v in counts.values() if finite(v)), default=1)
    sy = Scale(0.0, data_domain([top_value], include=(0.0,), pad=0.0)[1], height - bottom_pad, top)
    _y_axis(c, sy, left, width - right, y_label)
    slot = (width - right - left) / max(len(keys), 1)
    names = list(groups)
    bar_w = max(min(slot * 0.8 / max(len(names), 1), 40.0), 1.0)
    for i, key in enumerate(keys):
        centre = left + slot * (i + 0.5)
        if len(keys) <= 30 or i % math.ceil(len(keys) / 30) == 0:
            c.text(centre, height - bottom_pad + 14, shorten(str(key), 6), anchor="middle", cls="tick")
        for j, name in enumerate(names):
            value = groups[name].get(key)
            if not finite(value) or value <= 0:
                continue
            x = centre - bar_w * len(names) / 2 + j * bar_w
            c.mark("rect", {"x": x, "y": sy(float(value)), "width": max(bar_w - 1, 0.5),
                            "height": sy(0.0) - sy(float(value)), "fill": _pool_colour(name, j)},
                   kind="bar", tooltip=f"{name}: {value} with {key}")
    c.line(left, sy(0.0), width - right, sy(0.0), "axis")
    c.text((left + width - right) / 2, height - 10, x_label, anchor="middle", cls="axis-label")
    for j, name in enumerate(names):
        c.element("rect", {"x": left + 8 + j * 130, "y": 6, "width": 10, "height": 10,
                           "fill": _pool_colour(name, j)})
        c.text(left + 22 + j * 130, 15, shorten(name, 16), cls="legend")
    return c.render()


def _pool_colour(name: str, index: int) -> str:
    return COLOURS.get(name) or ("#0969da", "#8250df", "#bf8700", "#1a7f37")[index % 4]


def _sort_key(key: Any) -> tuple[int, float, str]:
    try:
        return 0, float(key), ""
    except (TypeError, ValueError):
        return 1, 0.0, str(key)
