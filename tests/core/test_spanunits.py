"""Span unit judgements counted from the spans (:mod:`labelgate.core.spanunits`) against a loop per character, and
every coefficient (point estimates and bootstrap intervals) against the same judgements expanded one by one."""

from __future__ import annotations

import numpy as np
import pytest

import labelgate as lg
from labelgate.core import spanunits, statistics
from labelgate.core.sets import SetRatings
from labelgate.core.spans import spans_by_pool
from labelgate.core.spanunits import SpanUnitRatings
from labelgate.metrics.panel import metrics_panel

LABELS = ("LOC", "ORG", "PER")


def overlapping_spans(seed, n_docs=15, pools=(("crowd", ("a", "b", "c")), ("trusted", ("t1", "t2"))),
                      mixed=False, absent=0.1):
    """A span table whose raters' spans overlap (with one label per rater and document unless ``mixed``), touch,
    repeat, or are absent (a "marked nothing" row, or no row: the rater did not annotate the document)."""
    rng = np.random.default_rng(seed)
    rows = []
    for pool, raters in pools:
        for d in range(n_docs):
            length = 1 + (d * 5) % 23
            for rater in raters:
                draw = rng.random()
                if draw < absent:
                    continue  # did not annotate
                if draw < absent + 0.15:
                    rows.append((pool, f"d{d}", rater, None, None, None, length))
                    continue
                label = LABELS[rng.integers(3)]
                for _ in range(int(rng.integers(1, 5))):
                    s = int(rng.integers(0, length))
                    e = int(rng.integers(s + 1, length + 1))
                    use = LABELS[rng.integers(3)] if mixed else label
                    rows.append((pool, f"d{d}", rater, s, e, use, length))
                    if rng.random() < 0.3 and e < length:  # a span that touches it
                        rows.append((pool, f"d{d}", rater, e, min(length, e + 2), use, length))
    keys = ("pool", "item_id", "rater_id", "start", "end", "label", "length")
    return {k: [row[j] for row in rows] for j, k in enumerate(keys)}


def literal_counts(table, pool, categories, rater_labels):
    """Item x category and rater x category counts by a loop per character (sets of labels: one label here)."""
    lengths, annotated, covered = {}, {}, {}
    for p, d, r, s, e, label, length in zip(*table.values(), strict=True):
        lengths[d] = length
        if p != pool:
            continue
        annotated.setdefault(d, set()).add(r)
        if s is not None:
            for u in range(s, e):
                covered[(d, u, r)] = label
    docs = sorted(lengths, key=lambda d: int(d[1:]))
    units = [(d, u) for d in docs for u in range(lengths[d])]
    column = {c: k for k, c in enumerate(categories)}
    rater_row = {r: k for k, r in enumerate(rater_labels)}
    items = np.zeros((len(units), len(categories)), dtype=np.int64)
    raters = np.zeros((len(rater_labels), len(categories)), dtype=np.int64)
    for i, (d, u) in enumerate(units):
        for r in annotated.get(d, ()):
            c = column[covered.get((d, u, r), "O")]
            items[i, c] += 1
            raters[rater_row[r], c] += 1
    return units, items, raters


@pytest.mark.parametrize("seed", range(8))
def test_counts_from_the_spans_equal_a_loop_per_character(seed):
    table = overlapping_spans(seed)
    pools = spans_by_pool(table)
    for name, r in pools.items():
        assert isinstance(r, SpanUnitRatings) and not r.expanded
        units, items, raters = literal_counts(table, name, r.categories, r.rater_labels)
        assert r.item_labels.tolist() == units
        np.testing.assert_array_equal(r.item_counts, items)
        np.testing.assert_array_equal(r.rater_counts, raters)
        assert r.n_ratings == int(items.sum())
        # and the judgements expanded one by one count the same
        q = r.n_categories
        np.testing.assert_array_equal(np.bincount(r.item_codes * q + r.value_codes, minlength=items.size), items.ravel())
        np.testing.assert_array_equal(np.bincount(r.rater_codes * q + r.value_codes, minlength=raters.size),
                                      raters.ravel())


@pytest.mark.parametrize("seed", range(3))
def test_block_by_block_expansion_equals_one_block(seed, monkeypatch):
    table = overlapping_spans(seed)
    whole = spans_by_pool(table)
    monkeypatch.setattr(spanunits, "FILL_BLOCK", 7)  # blocks far smaller than a document
    blocks = spans_by_pool(table)
    for name in whole:
        for codes in ("item_codes", "rater_codes", "value_codes"):
            np.testing.assert_array_equal(getattr(blocks[name], codes), getattr(whole[name], codes))


def expanded_copy(r, index):
    """The same judgements as an ordinary `Ratings` (every statistic computed from the codes)."""
    return lg.Ratings(r.item_codes.copy(), r.rater_codes.copy(), r.value_codes.copy(), item_labels=index,
                      rater_labels=r.rater_labels, categories=r.categories, level=r.level)


@pytest.mark.parametrize("seed", range(3))
def test_coefficients_and_intervals_equal_those_of_the_expanded_judgements(seed):
    pools = spans_by_pool(overlapping_spans(seed))
    index = pools["crowd"].item_index
    plain = {name: expanded_copy(r, index) for name, r in pools.items()}
    fresh = spans_by_pool(overlapping_spans(seed))
    got = metrics_panel(fresh, ci=0.95, n_boot=60, seed=seed)
    want = metrics_panel(plain, ci=0.95, n_boot=60, seed=seed)
    assert got.keys() == want.keys()
    for row in want:
        for metric, estimate in want[row].items():
            assert got[row][metric].value == pytest.approx(estimate.value, abs=1e-12, nan_ok=True), (row, metric)
            assert got[row][metric].ci == pytest.approx(estimate.ci, abs=1e-12, nan_ok=True), (row, metric)


def test_the_point_panel_reads_no_single_judgement():
    """Every rater of a pool annotated every document (each unit pairable): the counts are all the panel reads."""
    pools = spans_by_pool(overlapping_spans(0, absent=0.0))
    panel = metrics_panel(pools, ci=None)
    assert not any(r.expanded for r in pools.values())
    plain = {name: expanded_copy(r, pools["crowd"].item_index) for name, r in pools.items()}
    for row, estimates in metrics_panel(plain, ci=None).items():
        for metric, estimate in estimates.items():
            assert panel[row][metric].value == pytest.approx(estimate.value, abs=1e-12, nan_ok=True), (row, metric)


def test_overlaps_of_different_labels_still_make_set_judgements():
    pools = spans_by_pool(overlapping_spans(1, mixed=True))
    assert all(isinstance(r, SetRatings) for r in pools.values())


def test_same_label_overlaps_and_touching_spans_count_once():
    table = {"item_id": ["d"] * 4, "rater_id": ["a", "a", "a", "b"], "start": [0, 1, 3, None],
             "end": [3, 2, 5, None], "label": ["PER"] * 3 + [None], "length": [6] * 4}
    r = lg.Ratings.from_spans(table)
    assert isinstance(r, SpanUnitRatings)
    assert r.item_counts.tolist() == [[1, 1]] * 5 + [[2, 0]]
    assert r.rater_counts.tolist() == [[1, 5], [6, 0]]
    assert r.value_codes.tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]


def test_token_units_are_counted_from_the_spans():
    text = "Ada Lovelace met Charles Babbage in London"
    table = {"item_id": ["d"] * 4, "rater_id": ["a", "a", "b", "c"], "start": [0, 17, 0, None],
             "end": [12, 32, 3, None], "label": ["PER", "PER", "PER", None], "length": [len(text)] * 4,
             "tok": [text] * 4}
    r = lg.Ratings.from_spans(table, unit="token", tokens="tok")
    assert isinstance(r, SpanUnitRatings) and r.n_items == 7
    # tokens: Ada Lovelace met Charles Babbage in London; a: PER PER O PER PER O O; b: PER O ...; c: all O
    assert r.item_counts.tolist() == [[1, 2], [2, 1], [3, 0], [2, 1], [2, 1], [3, 0], [3, 0]]
    q = r.n_categories
    np.testing.assert_array_equal(np.bincount(r.item_codes * q + r.value_codes, minlength=r.n_items * q),
                                  r.item_counts.ravel())


def test_counts_and_judgements_are_made_only_when_read(monkeypatch):
    r = lg.Ratings.from_spans(overlapping_spans(2, pools=(("p", ("a", "b")),)))
    assert isinstance(r, SpanUnitRatings)
    assert not {"item_counts", "rater_counts", "category_counts"} & set(r.__dict__) and not r.expanded
    assert r.value_codes.size == r.n_ratings  # the gate's unit table reads the judgements only
    assert "item_counts" not in r.__dict__
    np.testing.assert_array_equal(r.category_counts, np.bincount(r.value_codes, minlength=r.n_categories))
    for module in (spanunits, statistics):  # a table over the bound is refused as for any Ratings
        monkeypatch.setattr(module, "MAX_COUNT_CELLS", r.n_items * r.n_categories - 1)
    with pytest.raises(lg.InputError, match="too many cells"):
        _ = lg.Ratings.from_spans(overlapping_spans(2, pools=(("p", ("a", "b")),))).item_counts


def test_pickles_and_reindexes_as_a_ratings():
    import pickle

    r = lg.Ratings.from_spans(overlapping_spans(3, pools=(("p", ("a", "b", "c")),)))
    back = pickle.loads(pickle.dumps(r))
    assert isinstance(back, SpanUnitRatings) and back.n_ratings == r.n_ratings
    np.testing.assert_array_equal(back.item_counts, r.item_counts)
    assert lg.krippendorff_alpha(back).value == pytest.approx(lg.krippendorff_alpha(r).value, abs=1e-12)
    half = r.subset_items(np.arange(0, r.n_items, 2))  # any re-indexing reads the judgements: a plain Ratings
    assert type(half) is lg.Ratings and half.n_ratings == int(r.item_counts[::2].sum())
