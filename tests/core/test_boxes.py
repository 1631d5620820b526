"""Boxes as object judgements: the grouping against a literal implementation of the written rule, the
invariants, matched IoU, pools and the errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import labelgate as lg
from labelgate.core import boxes as boxes_module
from labelgate.core.boxes import BoxColumns, boxes_by_pool, read_boxes

COLUMNS = ("item_id", "rater_id", "x", "y", "width", "height", "label")


def random_boxes(seed, n_images=15, raters=("a", "b", "c"), crowded=False, pool=None):
    """Boxes around a few true objects per image, jittered; with ``crowded`` a rater may draw several boxes on one
    object (groups whose merge order matters)."""
    rng = np.random.default_rng(seed)
    rows = []
    for image in range(n_images):
        objects = [(rng.uniform(0, 80), rng.uniform(0, 80), rng.uniform(8, 30), rng.uniform(8, 30),
                    ("car", "dog")[rng.integers(2)]) for _ in range(rng.integers(0, 5))]
        for rater in raters:
            if rng.random() < 0.1:
                continue
            drawn = 0
            for x, y, w, h, label in objects:
                for _ in range(1 + (crowded and rng.random() < 0.4)):
                    if rng.random() < 0.8:
                        j = rng.normal(0, 3, size=4)
                        flip = ("car", "dog")[rng.integers(2)] if rng.random() < 0.1 else label
                        rows.append((f"i{image}", rater, x + j[0], y + j[1], max(w + j[2], 1.0),
                                     max(h + j[3], 1.0), flip))
                        drawn += 1
            if not drawn:
                rows.append((f"i{image}", rater, None, None, None, None, None))
    table = {k: [row[j] for row in rows] for j, k in enumerate(COLUMNS)}
    if pool is not None:
        table["pool"] = [pool] * len(rows)
    return table


def iou(a, b):
    left, right = max(a[0], b[0]), min(a[0] + a[2], b[0] + b[2])
    top, bottom = max(a[1], b[1]), min(a[1] + a[3], b[1] + b[3])
    inter = max(right - left, 0) * max(bottom - top, 0)
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def reference_objects(table, threshold):
    """The rule, literally: per image, pairs of different raters with IoU >= threshold in decreasing IoU (ties by
    row order) merge their objects unless the merged object would hold two boxes of one rater."""
    rows = [k for k, x in enumerate(table["x"]) if x is not None]
    out = []
    for image in dict.fromkeys(table["item_id"][k] for k in rows):
        boxes = [k for k in rows if table["item_id"][k] == image]
        geometry = {k: tuple(table[c][k] for c in ("x", "y", "width", "height")) for k in boxes}
        pairs = [(iou(geometry[a], geometry[b]), a, b) for a, b in itertools.combinations(boxes, 2)
                 if table["rater_id"][a] != table["rater_id"][b]]
        pairs = sorted((p for p in pairs if p[0] >= threshold), key=lambda p: (-p[0], p[1], p[2]))
        objects = {k: {k} for k in boxes}
        for _, a, b in pairs:
            oa, ob = objects[a], objects[b]
            if oa is ob or {table["rater_id"][k] for k in oa} & {table["rater_id"][k] for k in ob}:
                continue
            merged = oa | ob
            for k in merged:
                objects[k] = merged
        out.extend({frozenset(o) for o in objects.values()})
    return set(out)


def grouped(table, threshold):
    boxes = read_boxes(table, BoxColumns(), threshold, "test")
    groups = {}
    for row, obj in enumerate(boxes.row_object.tolist()):
        if obj >= 0:
            groups.setdefault(obj, set()).add(row)
    return {frozenset(g) for g in groups.values()}


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7])
@pytest.mark.parametrize("seed", range(6))
def test_grouping_equals_the_written_rule(seed, threshold):
    for crowded in (False, True):
        table = random_boxes(seed, crowded=crowded)
        assert grouped(table, threshold) == reference_objects(table, threshold)


@pytest.mark.parametrize("block", [1, 5, 40])
def test_pairs_tested_block_by_block_group_as_the_written_rule(block, monkeypatch):
    """Blocks of whole images smaller than one image's pairs, and spanning several images: the same objects."""
    monkeypatch.setattr(boxes_module, "PAIR_BLOCK", block)
    for seed, crowded in ((0, False), (1, True), (2, True)):
        table = random_boxes(seed, crowded=crowded)
        assert grouped(table, 0.5) == reference_objects(table, 0.5)


def test_each_annotator_judges_every_object_of_the_image():
    table = random_boxes(4)
    r = lg.Ratings.from_boxes(table)
    assert r.categories == ("none", "car", "dog")
    objects = sorted(reference_objects(table, 0.5), key=min)
    annotators = {}
    for image, rater in zip(table["item_id"], table["rater_id"], strict=True):
        annotators.setdefault(image, set()).add(rater)
    expected = {}
    for obj in objects:
        image = table["item_id"][min(obj)]
        for rater in annotators[image]:
            mine = [k for k in obj if table["rater_id"][k] == rater]
            expected[(image, min(obj), rater)] = table["label"][mine[0]] if mine else "none"
    first_row = {}
    for obj in objects:
        first_row.setdefault(table["item_id"][min(obj)], []).append(min(obj))
    got = {}
    for i, g, v in zip(r.item_codes.tolist(), r.rater_codes.tolist(), r.value_codes.tolist(), strict=True):
        image, k = r.item_labels[i]
        got[(image, sorted(first_row[image])[k], r.rater_labels[g])] = r.categories[v]
    assert got == expected


def test_identical_annotations_give_alpha_one_and_shifted_boxes_are_misses():
    one = random_boxes(2, raters=("a",))
    same = {k: v * 3 for k, v in one.items()}
    same["rater_id"] = ["a"] * len(one["x"]) + ["b"] * len(one["x"]) + ["c"] * len(one["x"])
    r = lg.Ratings.from_boxes(same)
    assert lg.krippendorff_alpha(r).value == pytest.approx(1.0, abs=1e-12)
    assert lg.matched_iou(same).value == pytest.approx(1.0)
    shifted = {k: list(v) for k, v in same.items()}
    n = len(one["x"])
    shifted["x"] = [None if x is None else x + 1000 * (k // n) for k, x in enumerate(shifted["x"])]  # b, c apart
    s = lg.Ratings.from_boxes(shifted)
    drawn = sum(x is not None for x in one["x"])
    assert s.n_items == 3 * drawn  # no box is matched: every box its own object
    assert (np.asarray(s.categories, dtype=object)[s.value_codes] == "none").sum() == 2 * 3 * drawn


def test_matched_iou_is_the_mean_over_pairs_in_one_object():
    table = random_boxes(5)
    objects = reference_objects(table, 0.5)
    pairs = []
    for obj in objects:
        for a, b in itertools.combinations(sorted(obj), 2):
            ga = tuple(table[c][a] for c in ("x", "y", "width", "height"))
            gb = tuple(table[c][b] for c in ("x", "y", "width", "height"))
            pairs.append((table["rater_id"][a], table["rater_id"][b], iou(ga, gb)))
    est = lg.matched_iou(table)
    assert est.value == pytest.approx(np.mean([p[2] for p in pairs]), abs=1e-12)
    assert est.details["n_pairs"] == len(pairs)
    mean_a = np.mean([p[2] for p in pairs if "a" in p[:2]])
    assert est.details["per_rater"]["a"][0] == pytest.approx(mean_a, abs=1e-12)


def test_pools_share_the_objects():
    crowd, trusted = random_boxes(6, pool="crowd"), random_boxes(6, raters=("t",), pool="trusted")
    table = {k: crowd[k] + trusted[k] for k in crowd}
    pools = boxes_by_pool(table)
    x, y = pools["crowd"], pools["trusted"]
    assert x.shares_items_with(y) and x.categories == y.categories
    assert np.isfinite(lg.cross_kappa(x, y).value)


@pytest.mark.parametrize(("change", "message"), [
    ({"x": [None, 1.0]}, "some box coordinates"),
    ({"width": [0, 10]}, "positive finite"),
    ({"label": [None, "car"]}, "without a label"),
    ({"label": ["none", "car"]}, "'none'"),
])
def test_bad_rows_are_named(change, message):
    table = {"item_id": ["i", "i"], "rater_id": ["a", "b"], "x": [0, 1], "y": [0, 0], "width": [10, 10],
             "height": [10, 10], "label": ["car", "car"], **change}
    with pytest.raises(lg.InputError, match=message):
        lg.Ratings.from_boxes(table)


@pytest.mark.parametrize("threshold", [0, 1.5, "0.5", True])
def test_the_threshold_is_checked(threshold):
    with pytest.raises(lg.ParameterError, match="iou"):
        lg.Ratings.from_boxes(random_boxes(0), iou=threshold)


def test_arrow_tables_of_every_kind_read_like_mappings():
    pa = pytest.importorskip("pyarrow")
    from tests.core.test_spans import random_spans

    spans, boxes = random_spans(2), random_boxes(2)
    assert np.array_equal(lg.Ratings.from_spans(pa.table(spans)).value_codes,
                          lg.Ratings.from_spans(spans).value_codes)
    assert np.array_equal(lg.Ratings.from_boxes(pa.table(boxes)).value_codes,
                          lg.Ratings.from_boxes(boxes).value_codes)
    sets = {"item_id": [1, 1, 2, 2], "rater_id": ["a", "b", "a", "b"], "label": [["x"], [], ["x", "y"], None]}
    r = lg.Ratings.from_long(pa.table(sets), level="set")
    assert r.n_ratings == 3 and r.categories == (frozenset(), frozenset({"x"}), frozenset({"x", "y"}))
