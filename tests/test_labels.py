"""One label-keying rule: the gate's validation and the monitor match labels to categories identically."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from labelgate.core.labels import label_key, label_number, plain_label
from labelgate.monitor.merging import _codes
from labelgate.monitor.state import Meta
from labelgate.pipeline.validation import _canonical

LABELS = [" pos", "pos ", "pos", "Pos", "neg", "1", 1, 1.0, " 1.0", np.int64(1), True, np.bool_(False), "2e0",
          2, None, math.nan, "", "  "]


@pytest.mark.parametrize(("a", "b"), [(" pos", "pos"), ("pos ", "pos"), ("1", 1), (1.0, 1), (" 1.0", 1),
                                      (np.int64(1), 1), ("2e0", 2), (np.bool_(False), False)])
def test_the_same_label(a, b):
    assert label_key(a) == label_key(b)


@pytest.mark.parametrize(("a", "b"), [("Pos", "pos"), (True, 1), (False, 0), ("1", "01x"), ("", "0")])
def test_different_labels(a, b):
    assert label_key(a) != label_key(b)


@pytest.mark.parametrize("missing", [None, math.nan, np.float64("nan"), math.inf])
def test_missing_labels_have_no_key(missing):
    assert label_key(missing) is None
    assert label_number(missing) is None


def test_plain_label_keeps_the_key():
    for value in LABELS:
        if label_key(value) is not None:
            assert label_key(plain_label(value)) == label_key(value)


@pytest.mark.parametrize("categories", [["neg", "pos"], [1, 2], ["neg", "pos", 1], [False, True]])
def test_gate_validation_and_monitor_key_labels_identically(categories):
    labels = pd.Series(LABELS, dtype=object)
    # the gate: each label that matches a category is replaced by that category; others stay as read
    canonical = _canonical(labels, categories).tolist()
    gate = [categories.index(c) if label_key(v) is not None and any(c is x for x in categories) else -1
            for v, c in zip(LABELS, canonical, strict=True)]
    # the monitor: codes into the stream's explicit category list
    meta = Meta(level="nominal", categories=list(categories), center=None)
    codes, _, valid = _codes(labels, meta, explicit=True)
    assert list(codes) == gate
    assert meta.categories == list(categories)  # explicit categories never grow
    assert valid.tolist() == [g >= 0 for g in gate]
    if "pos" in categories:
        assert codes[0] == codes[1] == codes[2] == categories.index("pos")  # " pos", "pos ", "pos"


def test_monitor_grows_categories_by_key():
    meta = Meta(level="nominal", categories=[], center=None)
    codes, values, _ = _codes(pd.Series([" pos", "pos", "2", 2.0, "neg "], dtype=object), meta, explicit=False)
    assert meta.categories == ["pos", 2, "neg"]
    assert codes.tolist() == [0, 0, 1, 1, 2]
    assert values[2] == values[3] == 2.0 and math.isnan(values[0])
