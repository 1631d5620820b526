"""Text spans as unit judgements: the vectorised expansion against a loop per character, tokens, the errors, and
the coefficients on the expanded units against the krippendorff package and an enumeration of xRR eq. 9-11."""

from __future__ import annotations

import numpy as np
import pytest

import labelgate as lg
from labelgate.core.sets import SetRatings
from labelgate.core.spans import spans_by_pool

LABELS = ("LOC", "ORG", "PER")


def random_spans(seed, n_docs=12, raters=("a", "b", "c"), overlap=False, pool=None):
    """A span table: documents of random length, each rater annotating most documents (some marking nothing)."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(n_docs):
        length = 5 + (d * 7) % 35  # one length per document, whichever pool and seed
        truth, s = [], int(rng.integers(0, 6))
        while s < length - 1 and len(truth) < 4:  # entities that do not overlap
            e = int(rng.integers(s + 1, min(length, s + 8) + 1))
            truth.append((s, e, LABELS[rng.integers(3)]))
            s = e + int(rng.integers(0, 8))
        for rater in raters:
            if rng.random() < 0.15:
                continue  # did not annotate the document
            spans = [t for t in truth if rng.random() < 0.7]
            if overlap and rng.random() < 0.3:
                s = int(rng.integers(0, length - 1))
                spans.append((s, int(rng.integers(s + 1, length + 1)), LABELS[rng.integers(3)]))
            if not spans:
                rows.append((f"d{d}", rater, None, None, None, length))
            rows.extend((f"d{d}", rater, s, e, label, length) for s, e, label in spans)
    table = {k: [row[j] for row in rows] for j, k in enumerate(("item_id", "rater_id", "start", "end", "label",
                                                               "length"))}
    if pool is not None:
        table["pool"] = [pool] * len(rows)
    return table


def reference_units(table):
    """A loop per character: {(doc, position): {rater: frozenset of the labels covering it}}."""
    annotated, units, lengths = {}, {}, {}
    for d, r, s, e, label, length in zip(*(table[k] for k in ("item_id", "rater_id", "start", "end", "label",
                                                               "length")), strict=True):
        annotated.setdefault(d, set()).add(r)
        lengths[d] = length
        if s is not None:
            for p in range(s, e):
                units.setdefault((d, p, r), set()).add(label)
    out = {}
    for d, raters in annotated.items():
        for p in range(lengths[d]):
            out[(d, p)] = {r: frozenset(units.get((d, p, r), set())) for r in raters}
    return out


def judgements(r):
    """{(unit id, rater): label or frozenset} of a Ratings."""
    return {(r.item_labels[i], r.rater_labels[g]): r.categories[v]
            for i, g, v in zip(r.item_codes.tolist(), r.rater_codes.tolist(), r.value_codes.tolist(), strict=True)}


@pytest.mark.parametrize("seed", range(5))
def test_each_position_gets_the_covering_label_or_outside(seed):
    table = random_spans(seed)
    r = lg.Ratings.from_spans(table)
    assert not isinstance(r, SetRatings) and r.level == "nominal" and r.categories[0] == "O"
    expected = reference_units(table)
    got = judgements(r)
    assert len(got) == sum(len(v) for v in expected.values())
    for unit, by_rater in expected.items():
        for rater, labels in by_rater.items():
            assert got[(unit, rater)] == (next(iter(labels)) if labels else "O")


@pytest.mark.parametrize("seed", range(5))
def test_overlapping_spans_of_different_labels_make_set_judgements(seed):
    table = random_spans(seed, overlap=True)
    expected = reference_units(table)
    mixed = any(len(labels) > 1 for by_rater in expected.values() for labels in by_rater.values())
    r = lg.Ratings.from_spans(table)
    assert isinstance(r, SetRatings) == mixed
    if mixed:
        got = judgements(r)
        assert {key: got[key] for key in got} == {(u, g): s for u, v in expected.items() for g, s in v.items()}


def test_a_rater_who_marked_nothing_judges_every_position_outside():
    table = {"item_id": ["d", "d"], "rater_id": ["a", "b"], "start": [0, None], "end": [2, None],
             "label": ["PER", None], "length": [4, 4]}
    r = lg.Ratings.from_spans(table)
    assert r.n_items == 4 and r.n_ratings == 8
    assert r.item_labels.tolist() == [("d", 0), ("d", 1), ("d", 2), ("d", 3)]
    got = judgements(r)
    assert [got[(("d", p), "b")] for p in range(4)] == ["O"] * 4
    assert [got[(("d", p), "a")] for p in range(4)] == ["PER", "PER", "O", "O"]


def alpha_reference(r):
    krippendorff = pytest.importorskip("krippendorff")
    data = np.full((r.n_raters, r.n_items), np.nan)
    data[r.rater_codes, r.item_codes] = r.value_codes
    return krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")


@pytest.mark.parametrize("seed", range(4))
def test_alpha_of_the_units_equals_the_krippendorff_package(seed):
    r = lg.Ratings.from_spans(random_spans(seed))
    assert lg.krippendorff_alpha(r).value == pytest.approx(alpha_reference(r), abs=1e-9)


def cross_kappa_reference(x, y):
    """xRR eq. 9-11 with the nominal distance, by enumeration over the units' judgements."""
    xs, ys = {}, {}
    for r, out in ((x, xs), (y, ys)):
        for unit, value in zip(r.item_labels[r.item_codes], (r.categories[v] for v in r.value_codes), strict=True):
            out.setdefault(unit, []).append(value)
    common = [u for u in xs if u in ys]
    big_r, big_s = sum(len(xs[u]) for u in common), sum(len(ys[u]) for u in common)
    d_o = sum((len(xs[u]) + len(ys[u])) / (big_r + big_s) * sum(a != b for a in xs[u] for b in ys[u])
              / (len(xs[u]) * len(ys[u])) for u in common)
    x_count, y_count = {}, {}
    for u in common:
        for a in xs[u]:
            x_count[a] = x_count.get(a, 0) + 1
        for b in ys[u]:
            y_count[b] = y_count.get(b, 0) + 1
    d_e = sum(n * m for a, n in x_count.items() for b, m in y_count.items() if a != b) / (big_r * big_s)
    return 1.0 - d_o / d_e


@pytest.mark.parametrize("seed", range(3))
def test_cross_kappa_of_two_pools_equals_the_enumeration(seed):
    crowd = random_spans(seed, raters=("a", "b", "c"), pool="crowd")
    trusted = random_spans(seed, raters=("t1", "t2"), pool="trusted")
    table = {k: crowd[k] + trusted[k] for k in crowd}
    pools = spans_by_pool(table)
    x, y = pools["crowd"], pools["trusted"]
    assert x.shares_items_with(y) and x.categories == y.categories
    assert lg.cross_kappa(x, y).value == pytest.approx(cross_kappa_reference(x, y), abs=1e-9)
    separate = lg.Ratings.from_spans(crowd), lg.Ratings.from_spans(trusted)
    assert lg.cross_kappa(*separate).value == pytest.approx(lg.cross_kappa(x, y).value, abs=1e-12)


def test_tokens_from_offsets_and_from_whitespace():
    text = "Ada Lovelace met Babbage"
    tokens = [(0, 3), (4, 12), (13, 16), (17, 24)]
    base = {"item_id": ["d", "d", "d"], "rater_id": ["a", "b", "b"], "start": [0, 0, 17], "end": [12, 3, 24],
            "label": ["PER", "PER", "PER"], "length": [len(text)] * 3}
    by_offsets = lg.Ratings.from_spans({**base, "tok": [tokens] * 3}, unit="token", tokens="tok")
    by_text = lg.Ratings.from_spans({**base, "tok": [text] * 3}, unit="token", tokens="tok")
    for r in (by_offsets, by_text):
        assert r.n_items == 4
        got = judgements(r)
        assert [got[(("d", t), "a")] for t in range(4)] == ["PER", "PER", "O", "O"]
        assert [got[(("d", t), "b")] for t in range(4)] == ["PER", "O", "O", "PER"]
    partial = lg.Ratings.from_spans({**base, "start": [1, 0, 18], "end": [5, 3, 19], "tok": [text] * 3},
                                    unit="token", tokens="tok")
    got = judgements(partial)  # a span covers every token it shares a character with
    assert [got[(("d", t), "a")] for t in range(4)] == ["PER", "PER", "O", "O"]


@pytest.mark.parametrize(("change", "message"), [
    ({"start": [None, None]}, "start without an end"),
    ({"end": [0, None]}, "empty or reversed"),
    ({"end": [9, None]}, "past the document's length"),
    ({"label": ["O", None]}, "'O'"),
    ({"label": [None, None]}, "without a label"),
    ({"length": [4, 5]}, "different values"),
    ({"start": [0.5, None]}, "whole non-negative"),
])
def test_bad_rows_are_named(change, message):
    table = {"item_id": ["d", "d"], "rater_id": ["a", "b"], "start": [0, None], "end": [2, None],
             "label": ["PER", None], "length": [4, 4], **change}
    with pytest.raises(lg.InputError, match=message):
        lg.Ratings.from_spans(table)


def test_parameters_are_checked():
    table = {"item_id": ["d"], "rater_id": ["a"], "start": [0], "end": [2], "label": ["PER"], "length": [4]}
    with pytest.raises(lg.ParameterError, match="tokens"):
        lg.Ratings.from_spans(table, unit="token")
    with pytest.raises(lg.ParameterError, match="unit"):
        lg.Ratings.from_spans(table, unit="word")
    with pytest.raises(lg.InputError, match="length"):
        lg.Ratings.from_spans({k: v for k, v in table.items() if k != "length"})


def test_pandas_frames_with_nullable_offsets():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(random_spans(3))
    frame["start"] = frame["start"].astype("Int64")
    frame["end"] = frame["end"].astype("Int64")
    r = lg.Ratings.from_spans(frame)
    assert judgements(r) == judgements(lg.Ratings.from_spans(random_spans(3)))
