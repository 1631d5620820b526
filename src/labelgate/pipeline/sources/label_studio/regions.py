"""The regions of a Label Studio annotation as rows: the spans of a ``Labels`` control, the boxes of a
``RectangleLabels`` control.

A span is ``value.start`` / ``value.end`` (character offsets, end exclusive) with its label (``value.labels``) and
the length of the text the control marks (the task's data under the key the ``toName`` object shows); a box is
``value.x`` / ``y`` / ``width`` / ``height`` in percent of the image with its label (``value.rectanglelabels``).
An annotation that marked no region has one row without offsets or coordinates and without a label: it annotated the
item and found nothing, which counts (every unit of it is ``O`` / every object ``none``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from labelgate.errors import InputError, Reason
from labelgate.pipeline.sources.label_studio.labeling_config import VALUE_KEYS, Control

_BOX = ("x", "y", "width", "height")


def regions(results: Sequence[Mapping[str, Any]], spec: Control, what: str, annotation: Mapping[str, Any],
            task: Mapping[str, Any]) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    """``(label, geometry)`` of each region of ``spec`` in one annotation's ``results``: geometry ``(start, end,
    length)`` for spans, ``(x, y, width, height)`` for boxes; one ``(None, (None, ...))`` when there is none (for
    spans the length is known even then).

    Raises
    ------
    InputError
        A region without one label of the config, with offsets outside its text or a box outside the image, a rotated
        box, or a text that is not in the task's data; naming the annotation, the task and the control.
    """
    where = f"annotation {annotation.get('id')} (task {task.get('id')}) of {what}, control {spec.name!r}"
    context = {"annotation": annotation.get("id"), "task": task.get("id"), "control": spec.name, "project": what}
    length = _text_length(spec, task, where, context) if spec.kind == "spans" else None
    found = False
    for result in results:
        value = result.get("value") or {}
        labels = value.get(VALUE_KEYS[spec.type])
        if not isinstance(labels, list) or len(labels) != 1:
            raise InputError(f"A region of {where} has the labels {labels!r}, not exactly one.",
                             Reason.INVALID_PARAMETER, value=labels, **context)
        label = labels[0]
        if spec.categories is not None and label not in spec.categories:
            raise InputError(f"The label {label!r} of a region of {where} is not one of the labeling config's "
                             f"{spec.categories}.", Reason.UNKNOWN_CATEGORY, value=label, **context)
        found = True
        if spec.kind == "spans":
            yield label, (*_offsets(value, length or 0, where, context), length)
        else:
            yield label, _box(value, where, context)
    if not found:
        yield None, ((None, None, length) if spec.kind == "spans" else (None,) * len(_BOX))


def _text_length(spec: Control, task: Mapping[str, Any], where: str, context: dict[str, Any]) -> int:
    text = (task.get("data") or {}).get(spec.data_key or "")
    if not isinstance(text, str):
        raise InputError(f"The text of {where} (task data {spec.data_key!r}) is {type(text).__name__}, not text: its "
                         "length is unknown.", Reason.UNREADABLE_INPUT, **context)
    return len(text)


def _offsets(value: Mapping[str, Any], length: int, where: str, context: dict[str, Any]) -> tuple[int, int]:
    start, end = value.get("start"), value.get("end")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        raise InputError(f"A span of {where} has the offsets {start!r}..{end!r}, not character offsets (a span of an "
                         "HTML or hypertext object is not read).", Reason.NON_NUMERIC_VALUE, value=[start, end],
                         **context)
    assert isinstance(start, int) and isinstance(end, int)
    if not 0 <= start < end <= length:
        raise InputError(f"A span of {where} covers {start}..{end}, outside its text of {length} characters.",
                         Reason.INVALID_PARAMETER, value=[start, end], **context)
    return start, end


def _box(value: Mapping[str, Any], where: str, context: dict[str, Any]) -> tuple[float, ...]:
    numbers = [value.get(k) for k in _BOX]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in numbers):
        raise InputError(f"A box of {where} has the coordinates {numbers!r}, not four numbers.",
                         Reason.NON_NUMERIC_VALUE, value=numbers, **context)
    if float(value.get("rotation") or 0.0) % 360.0:
        raise InputError(f"A box of {where} is rotated by {value.get('rotation')} degrees; the objects are grouped "
                         "by the overlap of upright boxes.", Reason.INVALID_PARAMETER, value=value.get("rotation"),
                         **context)
    x, y, width, height = (float(v) for v in numbers)  # type: ignore[arg-type]
    tolerance = 1e-6  # percents Label Studio rounds may pass 100 by a hair
    if width <= 0 or height <= 0 or x < -tolerance or y < -tolerance or x + width > 100 + 1e-3 or \
            y + height > 100 + 1e-3:
        raise InputError(f"A box of {where} at x={x}, y={y}, width={width}, height={height} (percent) is empty or "
                         "outside the image.", Reason.INVALID_PARAMETER, value=numbers, **context)
    return x, y, width, height
