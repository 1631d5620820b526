"""Label keying: the one rule that decides when two labels are the same category.

A label read from a CSV file, a Parquet column, a database or a configuration can be the number ``2``, the float
``2.0``, the text ``"2"`` or ``" 2 "``; the gate's validation and the monitor must agree that these are one category.
The rule, used everywhere a label is matched against a category:

- surrounding white space is never part of a label (``" pos"`` and ``"pos"`` are one label);
- numbers and numeric texts are keyed by their value (``2``, ``2.0``, ``"2"``, ``"2.0"``, ``" 2"`` are one label);
- booleans are booleans, never numbers (``True`` is not ``1``);
- other texts are keyed exactly, case included (``"Pos"`` is not ``"pos"``);
- a missing label (``None``, NaN) and a non-finite number have no key;
- a label set (a tuple, list, set or frozenset of elements; level ``set``) is keyed by its canonical form
  (:func:`set_key`: its distinct elements as texts, sorted), so ``("b", "a")``, ``["a", "b"]`` and
  ``frozenset({"a", "b"})`` are one set, and the empty set is a label (none applies), not a missing one.

>>> label_key(" pos") == label_key("pos")
True
>>> label_key("2") == label_key(2.0) == label_key(" 2 ")
True
>>> label_key(True) == label_key(1)
False
>>> label_key(float("nan")) is None
True
>>> plain_label("2.0"), plain_label(" pos "), plain_label(2.5)
(2, 'pos', 2.5)
>>> label_key(["b", "a"]) == label_key(frozenset({"a", "b"})), plain_label({"b", "a"}), plain_label(())
(True, ('a', 'b'), ())
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

LabelKey = tuple[str, Any]

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def label_number(value: Any) -> int | float | None:
    """The finite number a label stands for (``2``, ``2.0``, ``"2"``, ``" 2 "`` → 2), or None.

    Booleans, non-numeric texts, missing values and non-finite numbers stand for no number.
    """
    value = _scalar(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not _NUMBER.fullmatch(text):
            return None
        value = float(text)
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value) if float(value).is_integer() else float(value)


_SETS = (tuple, list, set, frozenset)


def set_key(members: Any) -> tuple[str, ...]:
    """The canonical form of a label set: its distinct elements as texts, sorted (the same in every process and
    whatever the collection: a frozenset's iteration order depends on the process's string hashing)."""
    return tuple(sorted({str(_scalar(element)) for element in members}))


def label_key(value: Any) -> LabelKey | None:
    """The matching key of a label (see the module's rule); None for a missing label."""
    value = _scalar(value)
    if value is None:
        return None
    if isinstance(value, _SETS):
        return ("t", set_key(value))
    if isinstance(value, bool):
        return ("b", value)
    number = label_number(value)
    if number is not None:
        return ("n", float(number))
    if isinstance(value, float):  # NaN or infinite
        return None
    if isinstance(value, str):
        return ("s", value.strip())
    return ("s", str(value))


def plain_label(value: Any) -> Any:
    """The label as a category is stored: numbers as int/float, texts without surrounding white space, label sets
    in their canonical form (:func:`set_key`)."""
    if isinstance(value, _SETS):
        return set_key(value)
    number = label_number(value)
    if number is not None:
        return number
    value = _scalar(value)
    return value.strip() if isinstance(value, str) else value
