r"""Span and box matching scores reported beside the unit coefficients: span F1 and the mean matched IoU.

``span_f1(x, y)`` scores the spans of one pool ``x`` (e.g. the crowd) against those of another ``y`` (e.g. the
trusted pool), rater pair by rater pair. For every document annotated in both pools and every pair of a rater
:math:`a` of ``x`` and a rater :math:`b` of ``y`` who both annotated it, a span of :math:`a` is *matched* when
:math:`b` has a span with the same label and the same offsets (``match="exact"``) or sharing at least one
character (``match="overlap"``); likewise for the spans of :math:`b`. Summed over documents and rater pairs,

.. math::

    P = \frac{\sum \text{matched spans of } x}{\sum \text{spans of } x}, \qquad
    R = \frac{\sum \text{matched spans of } y}{\sum \text{spans of } y}, \qquad
    F_1 = \frac{2 P R}{P + R},

every span counted once per rater of the other pool on its document. With one rater per pool these are the
usual span-level precision, recall and F1 of ``x`` against the reference ``y`` (CoNLL's exact match, or the
lenient overlap match). ``matched_iou`` is the mean intersection over union of the boxes that the grouping rule
of :meth:`labelgate.Ratings.from_boxes` put into one object, over the pool and per rater.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from labelgate.core.boxes import BoxColumns, matched_pairs, read_boxes
from labelgate.core.build import require_columns
from labelgate.core.column import python_scalar
from labelgate.core.columns import factorize_objects
from labelgate.core.estimate import Estimate
from labelgate.core.spans import float_column
from labelgate.errors import DesignError, InputError, Reason, check_option

IntArray = npt.NDArray[np.int64]

__all__ = ["matched_iou", "span_f1"]


def _objects(column: Any) -> np.ndarray:
    out = np.empty(len(column), dtype=object)
    out[:] = column.tolist() if hasattr(column, "tolist") else list(column)
    return out


def _span_rows(data: Any, columns: tuple[str, ...], pool: str) -> dict[str, Any]:
    require_columns(data, [(role, name) for role, name in zip(("item", "rater", "start", "end", "label"), columns,
                                                              strict=True)])
    item, rater, start, end, label = columns
    s, e = float_column(data[start], start), float_column(data[end], end)
    marked = ~np.isnan(s) & ~np.isnan(e)
    if (marked & (e <= s)).any():
        k = int(np.argmax(marked & (e <= s)))
        raise InputError(f"Pool {pool}: row {k} has the empty or reversed span [{s[k]}, {e[k]}).",
                         Reason.NON_NUMERIC_VALUE, column=end, row=k)
    return {"item": _objects(data[item]), "rater": _objects(data[rater]), "start": s, "end": e,
            "label": _objects(data[label]), "marked": marked}


def span_f1(x: Any, y: Any, match: Literal["exact", "overlap"] = "exact", *, item: str = "item_id",
            rater: str = "rater_id", start: str = "start", end: str = "end", label: str = "label") -> Estimate:
    r"""Span-level F1 of the pool ``x`` against the pool ``y`` (definitions in :mod:`labelgate.metrics.spans`).

    Parameters
    ----------
    x, y : DataFrame or mapping of columns
        Span tables in the form of :meth:`labelgate.Ratings.from_spans` (one row per span; a row with empty
        offsets: the rater annotated the document and marked nothing), ``x`` the pool scored, ``y`` the reference.
    match : {"exact", "overlap"}, default "exact"
        Same label and same offsets, or same label and at least one shared character.
    item, rater, start, end, label : str
        Column names.

    Returns
    -------
    Estimate
        ``value`` is F1; ``details`` hold ``precision``, ``recall``, the matched and counted spans of each pool
        (``matched_x``, ``spans_x``, ``matched_y``, ``spans_y``) and ``match``. NaN F1 (with a reason) when
        neither pool marked a span on the common documents.

    Raises
    ------
    DesignError
        No document is annotated in both pools.

    Examples
    --------
    >>> import labelgate as lg
    >>> crowd = {"item_id": ["d1", "d1"], "rater_id": ["a", "a"], "start": [0, 10], "end": [5, 14],
    ...          "label": ["PER", "LOC"]}
    >>> trusted = {"item_id": ["d1"], "rater_id": ["t"], "start": [0], "end": [5], "label": ["PER"]}
    >>> est = lg.span_f1(crowd, trusted)
    >>> round(est.value, 4), est.details["precision"], est.details["recall"]
    (0.6667, 0.5, 1.0)
    """
    check_option(match, ("exact", "overlap"), "match", "span_f1")
    columns = (item, rater, start, end, label)
    px, py = _span_rows(x, columns, "x"), _span_rows(y, columns, "y")
    n_x = px["item"].size
    items = factorize_objects(np.concatenate([px["item"], py["item"]])).codes.astype(np.int64)
    raters = factorize_objects(np.concatenate([px["rater"], py["rater"]])).codes.astype(np.int64)
    labels = factorize_objects(np.concatenate([px["label"], py["label"]])).codes.astype(np.int64)
    if (items < 0).any() or (raters < 0).any():
        raise InputError("span_f1: a row has a missing document or rater id.", Reason.MISSING_ID)
    n_items = int(items.max()) + 1
    parts = []
    for side, rows in (("x", slice(0, n_x)), ("y", slice(n_x, None))):
        p = px if side == "x" else py
        parts.append({"item": items[rows], "rater": raters[rows], "label": labels[rows],
                      "start": np.where(p["marked"], p["start"], -1).astype(np.int64),
                      "end": np.where(p["marked"], p["end"], -1).astype(np.int64), "marked": p["marked"]})
    ax, ay = (_annotators(part, n_items) for part in parts)
    common = (ax > 0) & (ay > 0)
    if not common.any():
        raise DesignError("span_f1: no document is annotated in both pools.", Reason.NO_COMMON_ITEMS)
    matched_x, spans_x = _matched(parts[0], parts[1], common, ay, match)
    matched_y, spans_y = _matched(parts[1], parts[0], common, ax, match)
    precision = matched_x / spans_x if spans_x else float("nan")
    recall = matched_y / spans_y if spans_y else float("nan")
    if precision + recall > 0:
        f1 = 2 * precision * recall / (precision + recall)
    else:
        f1 = 0.0 if spans_x and spans_y else float("nan")
    details = {"precision": precision, "recall": recall, "matched_x": matched_x, "spans_x": spans_x,
               "matched_y": matched_y, "spans_y": spans_y, "match": match}
    reason = None if np.isfinite(f1) else "one pool marked no span on the common documents"
    return Estimate(metric="span_f1", value=float(f1), n_items=int(common.sum()),
                    n_ratings=int(parts[0]["marked"][common[parts[0]["item"]]].sum()
                                  + parts[1]["marked"][common[parts[1]["item"]]].sum()),
                    reason=reason, reason_code=None if reason is None else Reason.NO_PAIRABLE_ITEMS,
                    details=details)


def _annotators(part: dict[str, Any], n_items: int) -> IntArray:
    """Raters who annotated each document (a span or an empty row)."""
    n_raters = int(part["rater"].max()) + 1 if part["rater"].size else 1
    pairs = np.unique(part["item"] * n_raters + part["rater"])
    return np.bincount(pairs // n_raters, minlength=n_items).astype(np.int64)


def _distinct_spans(part: dict[str, Any], keep: npt.NDArray[np.bool_]) -> np.ndarray:
    """The distinct (item, rater, label, start, end) of the kept span rows (a rater's repeated span counts once)."""
    rows = np.column_stack([part[k][keep] for k in ("item", "rater", "label", "start", "end")])
    return np.unique(rows, axis=0) if rows.size else rows.reshape(0, 5)


def _matched(a: dict[str, Any], b: dict[str, Any], common: npt.NDArray[np.bool_], b_raters: IntArray,
             match: str) -> tuple[int, int]:
    """(matched, counted) spans of pool ``a`` against pool ``b``: each span of ``a`` on a common document counts
    once per rater of ``b`` on it, and is matched once per rater of ``b`` with a matching span."""
    spans_a = _distinct_spans(a, a["marked"] & common[a["item"]])
    spans_b = _distinct_spans(b, b["marked"] & common[b["item"]])
    counted = int(b_raters[spans_a[:, 0]].sum())
    if spans_a.shape[0] == 0 or spans_b.shape[0] == 0:
        return 0, counted
    if match == "exact":
        # the number of raters of b holding each (item, label, start, end): b's spans are distinct per rater
        keys_b, per_key = np.unique(spans_b[:, [0, 2, 3, 4]], axis=0, return_counts=True)
        keys_a = spans_a[:, [0, 2, 3, 4]]
        joint, inverse = np.unique(np.concatenate([keys_b, keys_a]), axis=0, return_inverse=True)
        count = np.zeros(joint.shape[0], dtype=np.int64)
        count[inverse.ravel()[:keys_b.shape[0]]] = per_key
        return int(count[inverse.ravel()[keys_b.shape[0]:]].sum()), counted
    # overlap: candidate pairs within (item, label) groups, then distinct (span of a, rater of b) with overlap
    group_a = spans_a[:, 0] * (int(max(spans_a[:, 2].max(), spans_b[:, 2].max())) + 1) + spans_a[:, 2]
    group_b = spans_b[:, 0] * (int(max(spans_a[:, 2].max(), spans_b[:, 2].max())) + 1) + spans_b[:, 2]
    order = np.argsort(group_b, kind="stable")
    sorted_b = group_b[order]
    lo = np.searchsorted(sorted_b, group_a, side="left")
    hi = np.searchsorted(sorted_b, group_a, side="right")
    width = hi - lo
    which_a = np.repeat(np.arange(group_a.size), width)
    run = np.concatenate(([0], np.cumsum(width)[:-1]))
    which_b = order[np.repeat(lo, width) + (np.arange(which_a.size) - np.repeat(run, width))]
    hit = (spans_a[which_a, 3] < spans_b[which_b, 4]) & (spans_b[which_b, 3] < spans_a[which_a, 4])
    pairs = np.unique(np.column_stack([which_a[hit], spans_b[which_b[hit], 1]]), axis=0)
    return int(pairs.shape[0]), counted


def matched_iou(data: Any, item: str = "item_id", rater: str = "rater_id", x: str = "x", y: str = "y",
                width: str = "width", height: str = "height", label: str = "label", *, iou: float = 0.5,
                ) -> Estimate:
    r"""Mean IoU of the boxes grouped into one object by :meth:`labelgate.Ratings.from_boxes`'s rule.

    Over every pair of boxes (of different raters) in one object: the pool's mean in ``value``, and per rater
    the mean over the pairs that hold one of their boxes in ``details["per_rater"]`` (``{rater: (mean, pairs)}``).
    Label agreement is not part of it (it is the coefficients' job); this says how tightly matched boxes fit.

    Parameters
    ----------
    data, item, rater, x, y, width, height, label, iou
        As in :meth:`labelgate.Ratings.from_boxes`.

    Examples
    --------
    >>> import labelgate as lg
    >>> boxes = {"item_id": ["i1", "i1"], "rater_id": ["a", "b"], "x": [0, 2], "y": [0, 0],
    ...          "width": [10, 10], "height": [10, 10], "label": ["car", "car"]}
    >>> est = lg.matched_iou(boxes)
    >>> round(est.value, 4), est.details["per_rater"]["a"]
    (0.6667, (0.6666666666666666, 1))
    """
    boxes = read_boxes(data, BoxColumns(item, rater, x, y, width, height, label), iou, "matched_iou")
    first, second, overlap = matched_pairs(boxes)
    n_raters = boxes.raters.n_uniques
    total = np.bincount(boxes.row_rater[first], weights=overlap, minlength=n_raters) + np.bincount(
        boxes.row_rater[second], weights=overlap, minlength=n_raters)
    count = np.bincount(boxes.row_rater[first], minlength=n_raters) + np.bincount(
        boxes.row_rater[second], minlength=n_raters)
    per_rater = {python_scalar(boxes.raters.uniques[g]): (float(total[g] / count[g]) if count[g] else float("nan"),
                                                          int(count[g])) for g in range(n_raters)}
    value = float(overlap.mean()) if overlap.size else float("nan")
    reason = None if overlap.size else "no two boxes were grouped into one object"
    return Estimate(metric="matched_iou", value=value, n_items=int(boxes.object_item.size),
                    n_ratings=int(boxes.drawn.sum()), reason=reason,
                    reason_code=None if reason is None else Reason.NO_PAIRABLE_ITEMS,
                    details={"n_pairs": int(overlap.size), "per_rater": per_rater, "iou_threshold": float(iou)})
