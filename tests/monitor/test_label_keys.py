"""One label-keying rule: the gate's validation and the monitor match labels to categories identically."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from labelgate.core.labels import label_key
from labelgate.monitor.merging import _codes
from labelgate.monitor.state import Meta
from labelgate.pipeline.validation import _canonical
from tests.core.test_labels import LABELS


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
