"""One label-keying rule (``labelgate.core.labels``): which labels are the same label, and which have no key.

The gate's validation and the monitor applying this rule identically: tests/monitor/test_label_keys.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from labelgate.core.labels import label_key, label_number, plain_label

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
