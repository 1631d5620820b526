"""Data shown in Prefect's UI (markdown artifacts) is escaped: a batch id or question name is text, never markup."""

from __future__ import annotations

import string
from typing import Any

#: HTML's special characters, as entities: a Markdown renderer passes raw HTML through, entities it shows as text.
_HTML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"}
#: The rest of ASCII punctuation, backslash-escaped (CommonMark allows it before any of them): no value can open
#: emphasis, code, a link, a heading, a list item or a table cell.
_MARKDOWN_ESCAPED = frozenset(string.punctuation) - set(_HTML_ENTITIES)


def markdown_text(value: Any) -> str:
    """``value`` as Markdown text that renders exactly as typed, on one line.

    HTML special characters become entities, other ASCII punctuation is backslash-escaped, and line breaks and other
    control characters are written as escapes (``\\n``), so that a value can neither inject HTML nor forge lines,
    links or table cells.

    Examples
    --------
    >>> print(markdown_text("<script>alert(1)</script>"))
    &lt;script&gt;alert\\(1\\)&lt;\\/script&gt;
    >>> print(markdown_text("b1\\n# forged"))
    b1\\\\n\\# forged
    """
    out = []
    for ch in "" if value is None else str(value):
        if ch in _HTML_ENTITIES:
            out.append(_HTML_ENTITIES[ch])
        elif ch in _MARKDOWN_ESCAPED:
            out.append("\\" + ch)
        elif not ch.isprintable():  # "\n" → the two characters \ n, with the backslash itself escaped
            out.append("\\" + repr(ch)[1:-1])
        else:
            out.append(ch)
    return "".join(out)
