"""span_f1 against a loop over documents, rater pairs and spans."""

from __future__ import annotations

import math

import pytest

import labelgate as lg
from tests.core.test_spans import random_spans


def span_sets(table):
    """{doc: {rater: set of (start, end, label)}} (a rater who marked nothing has an empty set)."""
    out = {}
    for d, r, s, e, label in zip(*(table[k] for k in ("item_id", "rater_id", "start", "end", "label")), strict=True):
        spans = out.setdefault(d, {}).setdefault(r, set())
        if s is not None:
            spans.add((s, e, label))
    return out


def matches(span, others, match):
    s, e, label = span
    if match == "exact":
        return span in others
    return any(label == m and s < e2 and s2 < e for s2, e2, m in others)


def f1_reference(x, y, match):
    xs, ys = span_sets(x), span_sets(y)
    counts = {"matched_x": 0, "spans_x": 0, "matched_y": 0, "spans_y": 0}
    for d in set(xs) & set(ys):
        for spans_a in xs[d].values():
            for spans_b in ys[d].values():
                counts["spans_x"] += len(spans_a)
                counts["spans_y"] += len(spans_b)
                counts["matched_x"] += sum(matches(s, spans_b, match) for s in spans_a)
                counts["matched_y"] += sum(matches(s, spans_a, match) for s in spans_b)
    p, r = counts["matched_x"] / counts["spans_x"], counts["matched_y"] / counts["spans_y"]
    return (2 * p * r / (p + r) if p + r else 0.0), p, r, counts


@pytest.mark.parametrize("match", ["exact", "overlap"])
@pytest.mark.parametrize("seed", range(5))
def test_span_f1_equals_the_pairwise_count(seed, match):
    x = random_spans(seed, raters=("a", "b", "c"), overlap=True)
    y = random_spans(seed + 50, raters=("t",), overlap=True)
    f1, p, r, counts = f1_reference(x, y, match)
    est = lg.span_f1(x, y, match=match)
    assert est.metric == "span_f1" and est.value == pytest.approx(f1, abs=1e-12)
    assert est.details["precision"] == pytest.approx(p) and est.details["recall"] == pytest.approx(r)
    assert {k: est.details[k] for k in counts} == counts


def test_identical_pools_score_one_and_overlap_is_lenient():
    x = random_spans(1, raters=("a",))  # one rater: the pool against itself matches every span
    assert lg.span_f1(x, x).value == pytest.approx(1.0)
    shifted = {**x, "start": [None if s is None else s + 1 if s + 1 < e else s for s, e in zip(x["start"],
                                                                                             x["end"], strict=True)]}
    assert lg.span_f1(shifted, x, match="overlap").value == pytest.approx(1.0)
    assert lg.span_f1(shifted, x, match="exact").value < 1.0


def test_degenerate_inputs():
    empty = {"item_id": ["d"], "rater_id": ["a"], "start": [None], "end": [None], "label": [None]}
    est = lg.span_f1(empty, empty)
    assert math.isnan(est.value) and est.reason
    other = {**empty, "item_id": ["e"]}
    with pytest.raises(lg.DesignError):
        lg.span_f1(empty, other)
    with pytest.raises(lg.ParameterError):
        lg.span_f1(empty, empty, match="fuzzy")
