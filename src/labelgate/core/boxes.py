r"""Bounding boxes as unit judgements: the boxes of different raters on an image are grouped into objects.

The grouping rule (deterministic; :func:`group_boxes`):

1. On each image, every pair of boxes drawn by *different* raters whose intersection over union
   :math:`IoU(a, b) = |a \cap b| / |a \cup b|` is at least the threshold is a candidate pair (labels play no part:
   a box of another label on the same object is a label disagreement, not a miss).
2. The candidate pairs are taken in decreasing IoU, ties in the order of the rows (the earlier row of the pair
   first, then the later one).
3. Every box starts as an object of its own; a pair merges the objects of its two boxes unless they already are
   one object or the merged object would hold two boxes of one rater.

Each object is a unit, identified by ``(image id, k)`` with objects numbered by their first row. Each rater who
annotated the image (a row with empty coordinates: annotated, drew nothing) judges every object of the image: the
label of their box in it, or ``"none"`` (missed). The result is a nominal `Ratings`, so label *and* detection
agreement come from the categorical coefficients.

Connected groups of candidate pairs in which no rater has two boxes become one object whatever the order (every
merge is allowed), so only groups with a repeated rater are merged pair by pair; the rest is vectorised.

numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from labelgate.core.build import check_ids, require_columns, row_label
from labelgate.core.column import Column, python_scalar
from labelgate.core.columns import factorize
from labelgate.core.index import LabelIndex
from labelgate.core.ratings import MULTI_LABEL, FloatArray, IntArray, Ratings
from labelgate.core.spans import code_region_labels, float_column
from labelgate.errors import InputError, ParameterError, Reason

NONE = "none"


@dataclass(frozen=True)
class BoxColumns:
    """The column names of a box table (the keyword arguments of :meth:`Ratings.from_boxes`)."""

    item: str = "item_id"
    rater: str = "rater_id"
    x: str = "x"
    y: str = "y"
    width: str = "width"
    height: str = "height"
    label: str = "label"


@dataclass
class BoxObjects:
    """Boxes grouped into objects: per box row its object (-1 for rows that drew nothing)."""

    items: Column
    raters: Column
    row_item: IntArray
    row_rater: IntArray
    drawn: npt.NDArray[np.bool_]
    row_object: IntArray  # object code of each row (-1: no box)
    object_item: IntArray  # image of each object
    label_code: IntArray  # 0..K-1 per box row, -1 for empty rows
    labels: list[Any]
    geometry: FloatArray  # (x, y, width, height) per row (NaN: no box)


def iou_of(a: FloatArray, b: FloatArray) -> FloatArray:
    """IoU of boxes ``(x, y, width, height)`` row by row (0 when the union is empty)."""
    left = np.maximum(a[:, 0], b[:, 0])
    right = np.minimum(a[:, 0] + a[:, 2], b[:, 0] + b[:, 2])
    top = np.maximum(a[:, 1], b[:, 1])
    bottom = np.minimum(a[:, 1] + a[:, 3], b[:, 1] + b[:, 3])
    inter = np.clip(right - left, 0, None) * np.clip(bottom - top, 0, None)
    union = a[:, 2] * a[:, 3] + b[:, 2] * b[:, 3] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


#: Box pairs tested per step of :func:`_candidate_pairs`: its temporaries stay this small, whatever the table's size.
PAIR_BLOCK = 1 << 18


def _candidate_pairs(box_item: IntArray, box_rater: IntArray, geometry: FloatArray, threshold: float,
                     ) -> tuple[IntArray, IntArray, FloatArray]:
    """Every pair (earlier, later box) of one image, different raters, IoU >= threshold (boxes sorted by image).

    Vectorised over the pairs of each image's boxes, block by block of whole images (about :data:`PAIR_BLOCK`
    pairs each; one Python step per block, not per image): the pairs of a large table are never all held at
    once, only those that pass.
    """
    n = box_item.size
    if n < 2:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    per_image = np.bincount(box_item)
    box_end = np.cumsum(per_image)  # one past each image's last box
    pairs_before = np.concatenate(([0], np.cumsum(per_image * (per_image - 1) // 2)))
    cuts = np.searchsorted(pairs_before, np.arange(PAIR_BLOCK, int(pairs_before[-1]), PAIR_BLOCK), side="left")
    images = np.unique(np.concatenate(([0], cuts, [per_image.size])))
    bounds = np.concatenate(([0], box_end))[images]
    found = [_image_pairs(box_item[a:b] - box_item[a], box_rater[a:b], geometry[a:b], threshold, a)
             for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True) if b > a]
    first, second, overlap = (np.concatenate([f[k] for f in found]) for k in range(3))
    return first, second, overlap


def _image_pairs(box_item: IntArray, box_rater: IntArray, geometry: FloatArray, threshold: float, shift: int,
                 ) -> tuple[IntArray, IntArray, FloatArray]:
    """:func:`_candidate_pairs` of the boxes of some whole images (``box_item`` from 0); positions + ``shift``."""
    n = box_item.size
    if n < 2:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    counts = np.bincount(box_item)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    # for box k (position p in its image of m boxes), partners are the later boxes of the image: m - p - 1
    position = np.arange(n) - starts[box_item]
    later = counts[box_item] - position - 1
    total = int(later.sum())
    first = np.repeat(np.arange(n), later)
    run_start = np.concatenate(([0], np.cumsum(later)[:-1]))
    second = first + 1 + (np.arange(total) - np.repeat(run_start, later))
    keep = box_rater[first] != box_rater[second]
    first, second = first[keep], second[keep]
    # the intersection's width first (one gather per side of a 1-D column): most pairs of an image are apart
    left, top = np.ascontiguousarray(geometry[:, 0]), np.ascontiguousarray(geometry[:, 1])
    right, bottom = left + geometry[:, 2], top + geometry[:, 3]
    across = np.minimum(right[first], right[second]) - np.maximum(left[first], left[second])
    keep = across > 0
    first, second, across = first[keep], second[keep], across[keep]
    down = np.minimum(bottom[first], bottom[second]) - np.maximum(top[first], top[second])
    keep = down > 0
    first, second = first[keep], second[keep]
    inter = across[keep] * down[keep]
    area = geometry[:, 2] * geometry[:, 3]
    overlap = inter / (area[first] + area[second] - inter)  # the union is at least the intersection, > 0
    keep = overlap >= threshold
    return first[keep] + shift, second[keep] + shift, overlap[keep]


def _components(n: int, first: IntArray, second: IntArray) -> IntArray:
    """Connected components of the candidate graph: the smallest box of each (label propagation)."""
    label = np.arange(n)
    while True:
        low = np.minimum(label[first], label[second])
        before = label.copy()
        np.minimum.at(label, first, low)
        np.minimum.at(label, second, low)
        label = label[label]  # pointer jumping: components of long chains settle in few rounds
        if np.array_equal(label, before):
            return label


def group_boxes(box_item: IntArray, box_rater: IntArray, geometry: FloatArray, threshold: float) -> IntArray:
    """The object of each box under the module's rule: the position of the object's first box.

    Boxes must be sorted by image (stably: in row order within each image).
    """
    first, second, overlap = _candidate_pairs(box_item, box_rater, geometry, threshold)
    n = box_item.size
    component = _components(n, first, second)
    # a component where a rater has two boxes is merged pair by pair; elsewhere every merge is allowed
    n_raters = int(box_rater.max()) + 1 if n else 1
    count = np.bincount(component * n_raters + box_rater, minlength=n * n_raters)  # boxes per (component, rater)
    crowded: npt.NDArray[np.bool_] = np.asarray((count.reshape(n, n_raters) > 1).any(axis=1), dtype=bool)
    hard = crowded[component[first]]
    if not crowded.any():
        return component
    return _greedy(first[hard], second[hard], overlap[hard], box_rater, component, crowded)


def _greedy(first: IntArray, second: IntArray, overlap: FloatArray, box_rater: IntArray, component: IntArray,
            crowded: npt.NDArray[np.bool_]) -> IntArray:
    """The rule's pair-by-pair merge on the components where one rater has two boxes."""
    order = np.lexsort((second, first, -overlap))  # decreasing IoU, ties by row order
    parent = component.copy()
    members = np.flatnonzero(crowded[component])
    parent[members] = members  # every box of a crowded component starts as its own object
    raters_of: dict[int, set[int]] = {}

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = int(parent[k])
        return k

    for a0, b0 in zip(first[order].tolist(), second[order].tolist(), strict=True):
        a, b = root(a0), root(b0)
        if a == b:
            continue
        ra = raters_of.get(a, {int(box_rater[a])})
        rb = raters_of.get(b, {int(box_rater[b])})
        if ra & rb:
            continue
        keep, gone = (a, b) if a < b else (b, a)  # the object keeps its first box as its name
        parent[gone] = keep
        raters_of[keep] = ra | rb
        raters_of.pop(gone, None)
    for k in members.tolist():
        parent[k] = root(k)
    return parent


def read_boxes(data: Any, names: BoxColumns, iou: float, function: str) -> BoxObjects:
    """Read a box table and group its boxes into objects (every error names the column and the row)."""
    if isinstance(iou, bool) or not isinstance(iou, (int, float)) or not 0.0 < float(iou) <= 1.0:
        raise ParameterError(f"The 'iou' threshold of {function} must be a number in (0, 1]; got {iou!r}.",
                             parameter="iou", value=iou)
    roles = [("item", names.item), ("rater", names.rater), ("x", names.x), ("y", names.y),
             ("width", names.width), ("height", names.height), ("label", names.label)]
    require_columns(data, roles)
    row_labels = getattr(data, "index", None)
    items, raters = factorize(data[names.item]), factorize(data[names.rater])
    check_ids(((names.item, items), (names.rater, raters)), row_labels)
    row_item, row_rater = items.codes.astype(np.int64), raters.codes.astype(np.int64)
    geometry = np.column_stack([float_column(data[c], c) for c in (names.x, names.y, names.width, names.height)])
    blank = np.isnan(geometry)
    drawn: npt.NDArray[np.bool_] = np.asarray(~blank.all(axis=1), dtype=bool)
    partial = drawn & blank.any(axis=1)
    if partial.any():
        k = int(np.argmax(partial))
        raise InputError(f"Row {row_label(row_labels, k)!r} has some box coordinates but not all; leave x, y, width "
                         "and height all empty for 'drew nothing'.", Reason.MISSING_VALUE,
                         row=row_label(row_labels, k))
    bad = drawn & (~np.isfinite(geometry).all(axis=1) | (geometry[:, 2] <= 0) | (geometry[:, 3] <= 0))
    if bad.any():
        k = int(np.argmax(bad))
        raise InputError(f"Row {row_label(row_labels, k)!r} has a box without a positive finite width and height.",
                         Reason.NON_NUMERIC_VALUE, column=names.width, row=row_label(row_labels, k))
    label_code, labels = code_region_labels(data[names.label], drawn, names.label, row_labels, "box", NONE,
                                            "no box on the object")
    rows = np.flatnonzero(drawn)
    rows = rows[np.argsort(row_item[rows], kind="stable")]  # boxes by image, in row order within it
    obj = group_boxes(row_item[rows], row_rater[rows], geometry[rows], float(iou))
    # objects numbered by image, then by their first row: the box positions are in that order already
    is_root = np.zeros(rows.size, dtype=bool)
    is_root[obj] = True  # an object is named by the position of its first box
    roots = np.flatnonzero(is_root)
    object_code = np.cumsum(is_root) - 1
    row_object = np.full(row_item.size, -1, dtype=np.int64)
    row_object[rows] = object_code[obj]
    return BoxObjects(items, raters, row_item, row_rater, drawn, row_object, row_item[rows][roots], label_code,
                      labels, geometry)


def object_index(boxes: BoxObjects) -> LabelIndex:
    """The unit ids ``(image id, k)``: the k-th object of the image (by first row), made when first read."""
    def make() -> np.ndarray:
        ids = boxes.items.uniques
        image = boxes.object_item
        starts = np.concatenate(([0], np.flatnonzero(image[1:] != image[:-1]) + 1))
        k = np.arange(image.size) - np.repeat(starts, np.diff(np.concatenate((starts, [image.size]))))
        out = np.empty(image.size, dtype=object)
        out[:] = [(python_scalar(ids[i]), int(j)) for i, j in zip(image.tolist(), k.tolist(), strict=True)]
        return out

    return LabelIndex(make=make, size=int(boxes.object_item.size))


def object_judgements(boxes: BoxObjects, rows: npt.NDArray[np.bool_] | None, index: LabelIndex) -> Ratings:
    """The judgements of the raters of ``rows`` (None: all) on every object of the images they annotated."""
    keep = np.ones(boxes.row_item.size, dtype=bool) if rows is None else rows
    n_raters = boxes.raters.n_uniques
    pair_key = np.unique(boxes.row_item[keep] * n_raters + boxes.row_rater[keep])
    pair_item, pair_rater = pair_key // n_raters, pair_key % n_raters
    n_images = boxes.items.n_uniques
    per_image = np.bincount(boxes.object_item, minlength=n_images)
    first_object = np.concatenate(([0], np.cumsum(per_image)[:-1]))
    size = per_image[pair_item]
    start = np.concatenate(([0], np.cumsum(size)))
    item_codes = np.repeat(first_object[pair_item] - start[:-1], size) + np.arange(int(start[-1]), dtype=np.int64)
    raters_used, rater_code = np.unique(pair_rater, return_inverse=True)
    rater_codes = np.repeat(rater_code.ravel().astype(np.int64), size)
    values = np.zeros(item_codes.size, dtype=np.int64)  # 0: "none"; label k: k + 1
    box = keep & boxes.drawn
    judgement = np.searchsorted(pair_key, boxes.row_item[box] * n_raters + boxes.row_rater[box])
    position = start[judgement] + boxes.row_object[box] - first_object[boxes.row_item[box]]
    values[position] = boxes.label_code[box] + 1
    rater_labels = np.asarray(boxes.raters.uniques, dtype=object)[raters_used]
    return Ratings(item_codes, rater_codes, values, item_labels=index, rater_labels=rater_labels,
                   categories=[NONE, *boxes.labels], level="nominal")


def matched_pairs(boxes: BoxObjects) -> tuple[IntArray, IntArray, FloatArray]:
    """Every pair of boxes (rows) grouped into one object, and their IoU: the matches of the rule."""
    rows = np.flatnonzero(boxes.row_object >= 0)
    rows = rows[np.argsort(boxes.row_object[rows], kind="stable")]
    obj = boxes.row_object[rows]
    counts = np.bincount(obj)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    position = np.arange(rows.size) - starts[obj]
    later = counts[obj] - position - 1
    first = np.repeat(np.arange(rows.size), later)
    run_start = np.concatenate(([0], np.cumsum(later)[:-1]))
    second = first + 1 + (np.arange(first.size) - np.repeat(run_start, later))
    a, b = rows[first], rows[second]
    return a, b, iou_of(boxes.geometry[a], boxes.geometry[b])


def from_boxes(data: Any, names: BoxColumns, iou: float) -> Ratings:
    """:meth:`Ratings.from_boxes` (documented there)."""
    boxes = read_boxes(data, names, iou, "Ratings.from_boxes")
    return object_judgements(boxes, None, object_index(boxes))


def boxes_by_pool(data: Any, pool: str = "pool", item: str = "item_id", rater: str = "rater_id", x: str = "x",
                  y: str = "y", width: str = "width", height: str = "height", label: str = "label", *,
                  iou: float = 0.5) -> dict[Any, Ratings]:
    """One object `Ratings` per pool of a box table: the objects are grouped from the boxes of every pool
    together (one unit index, one category list), and each pool's raters judge them.

    Examples
    --------
    >>> from labelgate.core.boxes import boxes_by_pool
    >>> table = {"pool": ["crowd", "trusted"], "item_id": ["img1", "img1"], "rater_id": ["a", "t"],
    ...          "x": [10, 12], "y": [10, 10], "width": [50, 50], "height": [40, 40], "label": ["car", "car"]}
    >>> pools = boxes_by_pool(table)
    >>> pools["crowd"].n_items, pools["crowd"].categories
    (1, ('none', 'car'))
    """
    require_columns(data, (("pool", pool),))
    boxes = read_boxes(data, BoxColumns(item, rater, x, y, width, height, label), iou, "boxes_by_pool")
    pools = factorize(data[pool])
    check_ids(((pool, pools),), getattr(data, "index", None))
    index = object_index(boxes)
    return {python_scalar(pools.uniques[k]): object_judgements(boxes, pools.codes == k, index)
            for k in range(pools.n_uniques)}


def _from_boxes_method(data: Any, item: str, rater: str, x: str, y: str, width: str, height: str, label: str, *,
                       iou: float) -> Ratings:
    return from_boxes(data, BoxColumns(item, rater, x, y, width, height, label), iou)


MULTI_LABEL["from_boxes"] = _from_boxes_method
