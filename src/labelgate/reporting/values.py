"""Small, dependency-free helpers shared by the report pages and the figures: numbers, times, links, anchors.

Everything here returns plain text; escaping is the templates' job (Jinja2 autoescape) and the SVG writer's.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import urlsplit

__all__ = ["anchor", "count_windows", "finite", "fmt", "href", "interval", "mapping", "number", "parse_time", "shorten"]


def finite(value: Any) -> TypeGuard[float]:
    """True for a real finite number (not a bool, not None, not NaN/inf); narrows the type for mypy.

    Examples
    --------
    >>> finite(0.5), finite(True), finite(float("nan")), finite(None)
    (True, False, False, False)
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def count_windows(rows: Any) -> int:
    """Windows among rows of a monitor's series: each window of each monitor and question once, whatever the number of
    its metrics, and no cumulative row (a pass's running totals are no window).

    Examples
    --------
    >>> rows = [{"question": "q", "scope": "window", "window_start": "a", "window_end": "b", "metric": m}
    ...         for m in ("spa", "irr_crowd")] + [{"question": "q", "scope": "cumulative", "window_end": "c"}]
    >>> count_windows(rows)
    1
    """
    return len({(row.get("monitor"), row.get("question"), row.get("window_start"), row.get("window_end"))
                for row in rows if (row.get("scope") or "window") == "window"})


def fmt(value: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals, or an em dash when it is missing or not finite.

    Examples
    --------
    >>> fmt(0.12345), fmt(None), fmt(float("nan")), fmt(3, 1)
    ('0.123', '—', '—', '3.0')
    """
    return f"{value:.{digits}f}" if finite(value) else "—"


def number(value: Any, digits: int = 3) -> str:
    """Integers with thousands separators, other numbers as :func:`fmt`.

    Examples
    --------
    >>> number(3003), number(0.25), number(None)
    ('3,003', '0.250', '—')
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return fmt(value, digits)


def interval(row: Mapping[str, Any], low: str = "ci_low", high: str = "ci_high") -> str:
    """``[low, high]`` of a metrics row, or an em dash when either bound is missing.

    Examples
    --------
    >>> interval({"ci_low": 0.1, "ci_high": 0.2}), interval({"ci_low": None})
    ('[0.100, 0.200]', '—')
    """
    lo, hi = row.get(low), row.get(high)
    return f"[{fmt(lo)}, {fmt(hi)}]" if finite(lo) and finite(hi) else "—"


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one (the reports read loosely typed JSON)."""
    return value if isinstance(value, Mapping) else {}


def shorten(text: str, limit: int = 32) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (the full text goes into a tooltip or a table).

    Examples
    --------
    >>> shorten("abcdef", 4)
    'abc…'
    """
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_time(value: Any) -> datetime | None:
    """An aware datetime (UTC when naive) from a datetime or an ISO 8601 string, else None.

    Examples
    --------
    >>> parse_time("2024-03-01T00:00:00").isoformat(), parse_time("yesterday")
    ('2024-03-01T00:00:00+00:00', None)
    """
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value))
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def anchor(question: Any) -> str:
    """A fragment id for a question: a digest of its name, so any name gives a valid id.

    Examples
    --------
    >>> anchor("tone <A>").startswith("q-"), len(anchor("x"))
    (True, 18)
    """
    return "q-" + hashlib.sha256(str(question).encode("utf-8")).hexdigest()[:16]


def href(target: Any, base: Path | None = None) -> str | None:
    """A safe link target, or None.

    ``http``/``https``/``file`` URLs are kept; other schemes (``javascript:``, ``data:``...) are never
    linked. A local path inside ``base`` (the report's folder) becomes a relative link, so the run folder can
    be moved or archived; any other path becomes a ``file://`` URI.

    Examples
    --------
    >>> href("javascript:alert(1)") is None, href("https://example.org/x")
    (True, 'https://example.org/x')
    >>> href("/runs/b1/result.json", base=Path("/runs/b1"))
    'result.json'
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
