"""matplotlib figures as inline SVG for the HTML reports: offline, deterministic, with marks and tooltips.

matplotlib is the optional ``report`` extra and is imported only when a figure is drawn. Figures are built on
:class:`matplotlib.figure.Figure` directly and written by the SVG backend, so pyplot's global backend and
figure manager are never touched; the settings (matplotlib's defaults and :data:`RC`, not the user's
matplotlibrc) apply only while a figure is built and saved (:func:`matplotlib.rc_context`, under a lock
because rcParams are process-wide).

Settings that matter for a report that opens offline and shows untrusted ids:

- ``svg.fonttype: none``: text stays ``<text>`` (small, selectable), no font is embedded or fetched; the page
  CSS names the font stack;
- ``text.usetex: False`` and ``text.parse_math: False``: an id such as ``$x$`` is drawn as typed, never as
  mathtext or TeX; log axes get a plain formatter (the default one writes mathtext);
- ``svg.hashsalt`` fixed and no ``Date`` metadata: the same data gives the same bytes.

The SVG text is then rewritten for inlining in HTML (:func:`_finish`): no XML prolog or metadata, no global
``<style>``, ``href`` instead of ``xlink:href``, element ids made unique per figure (several figures share one
page) and only where something refers to them, coordinates cut to two decimals. Drawn data items registered
with :meth:`Chart.mark` become ``<g class="mark KIND" data-n="N">`` with a ``<title>`` tooltip (and one tooltip
per point when given); the root ``<svg class="lg-chart lg-KIND" data-marks="TOTAL">`` declares how many data
items it draws, so tests and readers can check that nothing was dropped.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

__all__ = ["INSTALL_HINT", "Chart", "available", "draw"]

INSTALL_HINT = "pip install 'labelgate[report]'"
_SVG = "http://www.w3.org/2000/svg"
_XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
_G, _TITLE, _USE, _PATH = (f"{{{_SVG}}}{tag}" for tag in ("g", "title", "use", "path"))
_DROPPED = {f"{{{_SVG}}}metadata", f"{{{_SVG}}}style"}
#: matplotlib settings while a report figure is built and saved (see the module docstring).
RC: dict[str, Any] = {
    "svg.fonttype": "none", "svg.hashsalt": "labelgate", "svg.image_inline": True,
    "text.usetex": False, "text.parse_math": False, "axes.formatter.use_mathtext": False,
    "font.family": ["sans-serif"], "font.sans-serif": ["DejaVu Sans"], "font.size": 8.5,
    "axes.titlesize": 9, "axes.labelsize": 8.5, "axes.labelcolor": "#57606a", "axes.edgecolor": "#8c959f",
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "axes.axisbelow": True,
    "grid.color": "#eaeef2", "grid.linewidth": 0.8, "xtick.color": "#57606a", "ytick.color": "#57606a",
    "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 8, "legend.frameon": False,
    "figure.dpi": 72, "savefig.dpi": 72, "savefig.facecolor": "white", "lines.solid_capstyle": "round",
    "path.simplify": True, "timezone": "UTC",
}
#: Process-level settings the figures never touch (the rest start from matplotlib's defaults, whatever a
#: user's matplotlibrc or style says, so the same data gives the same figure everywhere).
_PROCESS_KEYS = ("backend", "backend_fallback", "interactive")
_LOCK = threading.Lock()
_STYLE_FONT = re.compile(r"font-family:[^;]*;?\s*")
_DECIMALS = re.compile(r"(\.\d\d)\d+")
_URL_REF = re.compile(r"url\(#([^)]+)\)")


def available() -> bool:
    """True when matplotlib is installed (the ``report`` extra), found without importing it."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        return False


@dataclass
class _Mark:
    kind: str
    n: int
    tooltip: str = ""
    tooltips: Sequence[str] = ()


@dataclass
class Chart:
    """A figure under construction and the data marks registered on its artists.

    Attributes
    ----------
    figure : matplotlib.figure.Figure
        The figure to draw on (no pyplot).
    """

    figure: Any
    marks: dict[str, _Mark] = field(default_factory=dict)
    classes: dict[str, str] = field(default_factory=dict)

    def mark(self, artist: Any, kind: str, n: int = 1, tooltip: str = "",
             tooltips: Sequence[str] = ()) -> Any:
        """Register ``artist`` as ``n`` drawn data items of ``kind`` (``tooltips``: one per item, in order)."""
        gid = f"lgmark{len(self.marks)}"
        artist.set_gid(gid)
        self.marks[gid] = _Mark(kind, n, tooltip, tooltips)
        return artist

    def tag(self, artist: Any, cls: str) -> Any:
        """Give ``artist`` a CSS class without counting it as data (thresholds, labels, diagonals)."""
        gid = f"lgtag{len(self.classes)}"
        artist.set_gid(gid)
        self.classes[gid] = cls
        return artist


def draw(kind: str, title: str, size: tuple[float, float], paint: Callable[[Chart], None]) -> str:
    """Build a figure with ``paint`` and return it as an inline ``<svg>`` element.

    Parameters
    ----------
    kind : str
        Chart kind, a fixed word of this package (``intervals``, ``scatter``...); becomes a CSS class.
    title : str
        Accessible title (``<title>`` and ``aria-label``), escaped.
    size : tuple of float
        Width and height in inches (72 SVG units each).
    paint : callable
        Draws on ``chart.figure`` and registers marks.

    Raises
    ------
    ImportError
        When matplotlib is not installed.
    """
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    settings = {k: v for k, v in matplotlib.rcParamsDefault.items() if k not in _PROCESS_KEYS} | RC
    buffer = io.StringIO()
    with _LOCK, matplotlib.rc_context(cast("Any", settings)):
        chart = Chart(Figure(figsize=size))
        FigureCanvasSVG(chart.figure)
        paint(chart)
        chart.figure.savefig(buffer, format="svg", metadata={"Date": None})
    raw = buffer.getvalue()
    # ids unique per figure in a page of many figures (two figures may draw the same data under two titles),
    # and the same for the same figure, so a re-render compares equal
    prefix = "f" + hashlib.sha256(f"{kind}\0{title}\0{raw}".encode()).hexdigest()[:10] + "-"
    return _finish(raw, kind, title, chart, prefix)


def _finish(raw: str, kind: str, title: str, chart: Chart, prefix: str) -> str:
    root = ET.fromstring(raw[raw.index("<svg"):])
    parents = {child: parent for parent in root.iter() for child in parent}
    for element in [e for e in root.iter() if e.tag in _DROPPED]:
        parents[element].remove(element)
    for defs in [e for e in root.iter(f"{{{_SVG}}}defs") if len(e) == 0]:
        parents[defs].remove(defs)
    renamed = _referenced_ids(root, prefix)
    total = 0
    for element in list(root.iter()):
        _compact(element, renamed)
        gid = element.get("id")
        if gid is None:
            continue
        if gid in chart.marks:
            mark = chart.marks[gid]
            element.set("class", f"mark {mark.kind}")
            element.set("data-n", str(mark.n))
            total += mark.n
            if mark.tooltips:
                _item_tooltips(element, mark.tooltips)
            if mark.tooltip:
                _prepend_title(element, mark.tooltip)
        elif gid in chart.classes:
            element.set("class", chart.classes[gid])
        if gid in renamed:
            element.set("id", renamed[gid])
        else:
            del element.attrib["id"]
    for name in ("version", "id"):
        root.attrib.pop(name, None)
    root.set("class", f"lg-chart lg-{kind}")
    root.set("role", "img")
    root.set("aria-label", title)
    root.set("data-marks", str(total))
    _prepend_title(root, title)
    _flatten(root)
    for element in root.iter():  # plain tag names: the HTML parser puts inline <svg> content in the SVG namespace
        element.tag = element.tag.rpartition("}")[2]
    root.set("xmlns", _SVG)
    return ET.tostring(root, encoding="unicode")


def _flatten(element: ET.Element) -> None:
    """Replace the plain groups matplotlib nests (no attribute left, no tooltip) by their content (size)."""
    children: list[ET.Element] = []
    for child in element:
        _flatten(child)
        plain = child.tag == _G and not child.attrib and not any(c.tag == _TITLE for c in child)
        children.extend(child if plain else [child])
    element[:] = children


def _referenced_ids(root: ET.Element, prefix: str) -> dict[str, str]:
    """Ids something points to (clip paths, marker and path definitions), renamed uniquely for this figure."""
    found: dict[str, str] = {}
    for element in root.iter():
        for name, value in element.attrib.items():
            targets = _URL_REF.findall(value) if "url(#" in value else (
                [value[1:]] if name in ("href", _XLINK_HREF) and value.startswith("#") else [])
            for target in targets:
                found.setdefault(target, f"{prefix}{len(found)}")
    return found


def _compact(element: ET.Element, renamed: dict[str, str]) -> None:
    """Shorter, HTML-ready attributes: plain ``href``, renamed references, two decimals, no font stack."""
    attrib = element.attrib
    element.tail = None
    if element.text is not None and not element.text.strip():
        element.text = None
    if _XLINK_HREF in attrib:
        target = attrib.pop(_XLINK_HREF)
        attrib["href"] = "#" + renamed[target[1:]] if target.startswith("#") and target[1:] in renamed else target
    for name in ("clip-path", "mask", "fill"):
        value = attrib.get(name)
        if value and "url(#" in value:
            attrib[name] = _URL_REF.sub(lambda m: f"url(#{renamed.get(m.group(1), m.group(1))})", value)
    for name in ("d", "x", "y", "width", "height", "transform", "points"):
        value = attrib.get(name)
        if value is not None and element.tag != f"{{{_SVG}}}svg":
            attrib[name] = _DECIMALS.sub(r"\1", " ".join(value.split()))
    transform = attrib.get("transform")
    if transform is not None and transform.startswith("rotate(-0 "):
        del attrib["transform"]
    style = attrib.get("style")
    if style is not None and "font-family" in style:
        attrib["style"] = _STYLE_FONT.sub("", style).strip()


def _prepend_title(element: ET.Element, text: str) -> None:
    title = ET.Element(_TITLE)
    title.text = text
    element.insert(0, title)


def _item_tooltips(element: ET.Element, tooltips: Sequence[str]) -> None:
    """One ``<title>`` per drawn item (``<use>`` of a marker line, or the paths of a collection), in order.

    Items are wrapped in a ``<g>`` with the title; when the count differs from ``tooltips`` (an item was
    clipped away) nothing is wrapped rather than mislabelled.
    """
    items = list(element.iter(_USE)) or [child for child in element if child.tag == _PATH]
    if len(items) != len(tooltips):
        return
    tips = {id(item): tip for item, tip in zip(items, tooltips, strict=True)}
    holders = {id(parent): parent for parent in element.iter() if any(id(c) in tips for c in parent)}
    for parent in holders.values():
        children = list(parent)
        for index, child in enumerate(children):
            if id(child) in tips:
                wrapper = ET.Element(_G)
                _prepend_title(wrapper, tips[id(child)])
                wrapper.append(child)
                children[index] = wrapper
        parent[:] = children
