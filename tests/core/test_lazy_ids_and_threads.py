"""Item ids made only when read, and the build and panel on threads, change no number and no error.

* :class:`labelgate.core.index.LabelIndex`: a `Ratings` built from a table knows its item count without making
  the ids; pools of one table share one index (they align by code without making them); a copy or pickle carries
  the ids themselves; every read gives the reference ids.
* :func:`labelgate.core.parallel.run_steps`: forced onto threads (``MIN_ROWS`` 0), every input form and every
  pool split gives the reference `Ratings`, the first failing step in order raises (the same error as without
  threads), and the panel's estimates (bootstrap intervals included) are those computed without threads. Builds
  whose columns are two or more of Python objects (object arrays, lists, numpy strings) run one column after
  another even so, with the same result.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import pickle
import threading

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
from labelgate.core import parallel
from labelgate.core.column import EncodedColumn
from labelgate.core.columns import visits_objects
from labelgate.core.index import LabelIndex, same_index
from labelgate.core.parallel import run_steps, thread_count
from labelgate.errors import InputError, ParameterError
from labelgate.metrics.panel import metrics_panel
from tests.core.test_build_routes import ARROW_STR, assert_every_form_is_the_reference, needs_pyarrow, pa, random_table


@pytest.fixture
def threads(monkeypatch):
    """Every build and panel of the test on two threads, whatever its size."""
    monkeypatch.setattr(parallel, "MIN_ROWS", 0)
    monkeypatch.setenv("LABELGATE_THREADS", "2")


def _ascii_frame(n_items=300, n_raters=12, seed=0, pools=("crowd", "trusted")):
    """Arrow-string ids of one width (the route whose ids are made on demand), two pools."""
    rng = np.random.default_rng(seed)
    rows = [(f"i{i:07d}", f"w{k:03d}", int(rng.integers(0, 4)), pool)
            for i in rng.permutation(n_items) for pool in pools
            for k in rng.choice(n_raters, size=int(rng.integers(1, 4)), replace=False)]
    frame = pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])
    return frame.astype({"item_id": ARROW_STR, "rater_id": ARROW_STR, "pool": ARROW_STR})


# ------------------------------------------------------------------ the lazy index
def test_a_label_index_makes_its_labels_once_on_first_read():
    calls = []

    def make():
        calls.append(1)
        return np.asarray(["a", "b", "c"], dtype=object)

    index = LabelIndex(make=make, size=3)
    assert len(index) == 3 and not index.ready and not calls
    first = index.labels
    assert index.labels is first and calls == [1] and index.ready
    assert first.tolist() == ["a", "b", "c"]


def test_a_label_index_refuses_a_maker_of_the_wrong_size_and_bad_arguments():
    index = LabelIndex(make=lambda: np.asarray(["a"], dtype=object), size=2)
    with pytest.raises(AssertionError, match="an index of 2 labels made 1"):
        _ = index.labels
    with pytest.raises(TypeError, match="either labels or make"):
        LabelIndex(np.asarray(["a"], dtype=object), make=lambda: np.asarray(["a"], dtype=object))
    with pytest.raises(TypeError, match="either labels or make"):
        LabelIndex()
    with pytest.raises(TypeError, match="needs its size"):
        LabelIndex(make=lambda: np.asarray(["a"], dtype=object))


def test_same_index_is_the_same_object_or_the_same_array():
    labels = np.asarray(["a", "b"], dtype=object)
    lazy = LabelIndex(make=lambda: labels, size=2)
    assert same_index(lazy, lazy)
    assert not same_index(lazy, LabelIndex(labels))  # not made yet: not known to be the same
    _ = lazy.labels
    assert same_index(lazy, LabelIndex(labels))
    assert not same_index(LabelIndex(labels), LabelIndex(labels.copy()))


@needs_pyarrow
def test_a_build_from_a_table_makes_no_item_id_until_one_is_read():
    frame = _ascii_frame().query("pool == 'crowd'")
    r = lg.Ratings.from_long(frame)
    assert not r.item_index.ready
    assert r.n_items == frame["item_id"].nunique()
    estimate = float(lg.fleiss_kappa(r))  # no coefficient reads the ids
    assert not r.item_index.ready
    assert list(r.item_labels) == list(dict.fromkeys(frame["item_id"]))
    assert r.item_index.ready
    assert float(lg.fleiss_kappa(r)) == estimate


@needs_pyarrow
def test_pools_share_one_index_without_making_the_ids():
    pools = lg.ratings_by_pool(_ascii_frame())
    crowd, trusted = pools["crowd"], pools["trusted"]
    assert crowd.item_index is trusted.item_index and not crowd.item_index.ready
    assert crowd.shares_items_with(trusted)
    lg.cross_kappa(crowd, trusted)  # items align by code
    assert not crowd.item_index.ready
    assert crowd.item_labels is trusted.item_labels


def test_a_copy_or_pickle_of_lazily_built_ratings_carries_the_ids():
    frame = _ascii_frame().query("pool == 'crowd'")
    for clone in (lambda r: pickle.loads(pickle.dumps(r)), copy.deepcopy):
        r = lg.Ratings.from_long(frame)
        other = clone(r)
        assert other.item_index.ready
        assert list(other.item_labels) == list(r.item_labels)
        assert float(lg.krippendorff_alpha(other)) == float(lg.krippendorff_alpha(r))


@needs_pyarrow
def test_derived_ratings_keep_the_index_unmade():
    r = lg.Ratings.from_long(_ascii_frame().query("pool == 'crowd'"))
    derived = r.with_categories([*r.categories, 99])
    assert derived.item_index is r.item_index and not derived.item_index.ready
    subset = r.subset_items([0, 2, 3])  # its own, smaller index, made from the original's on first read
    assert not subset.item_index.ready and not r.item_index.ready and subset.n_items == 3
    assert list(subset.item_labels) == [r.item_labels[k] for k in (0, 2, 3)]


def test_a_duplicate_in_a_pool_names_its_table_row_and_ids():
    frame = _ascii_frame()
    row = frame.iloc[[7]]
    data = pd.concat([frame, row]).reset_index(drop=True)
    data.index = [f"row-{k}" for k in range(len(data))]
    with pytest.raises(InputError) as caught:
        lg.ratings_by_pool(data)
    message = str(caught.value)
    assert f"judged item {row['item_id'].iloc[0]!r}" in message and "'row-7'" in message
    assert f"'row-{len(data) - 1}'" in message


# ------------------------------------------------------------------ threads
def test_run_steps_keeps_the_order_and_raises_the_first_failure_in_order(monkeypatch):
    monkeypatch.setenv("LABELGATE_THREADS", "2")
    assert run_steps([lambda: 1, lambda: 2, lambda: 3], rows=parallel.MIN_ROWS) == [1, 2, 3]
    later_failed = threading.Event()

    def first():
        later_failed.wait(timeout=30)  # fails after the second step has failed
        raise ValueError("first step")

    def second():
        try:
            raise KeyError("second step")
        finally:
            later_failed.set()

    with pytest.raises(ValueError, match="first step"):
        run_steps([first, second], rows=parallel.MIN_ROWS)


def test_run_steps_uses_threads_only_for_large_tables_and_when_allowed(monkeypatch):
    names = lambda: threading.current_thread().name  # noqa: E731
    monkeypatch.setenv("LABELGATE_THREADS", "2")
    assert all(name.startswith("labelgate") for name in run_steps([names, names], rows=parallel.MIN_ROWS))
    assert run_steps([names, names], rows=parallel.MIN_ROWS - 1) == [threading.current_thread().name] * 2
    monkeypatch.setenv("LABELGATE_THREADS", "1")
    assert run_steps([names, names], rows=parallel.MIN_ROWS) == [threading.current_thread().name] * 2


def test_steps_of_which_two_hold_the_interpreter_lock_run_one_after_another(monkeypatch):
    names = lambda: threading.current_thread().name  # noqa: E731
    here = threading.current_thread().name
    monkeypatch.setenv("LABELGATE_THREADS", "2")
    assert run_steps([names, names, names], rows=parallel.MIN_ROWS,
                     holds_interpreter_lock=[True, False, True]) == [here] * 3
    on_threads = run_steps([names, names, names], rows=parallel.MIN_ROWS,
                           holds_interpreter_lock=[True, False, False])
    assert all(name.startswith("labelgate") for name in on_threads)


def _threads_of_factorize(monkeypatch, module):
    """The names of the threads on which ``module``'s ``factorize`` is called from now on (a spy, in call order)."""
    seen = []
    factorize = importlib.import_module(module).factorize

    def spy(column, **kwargs):
        seen.append(threading.current_thread().name)
        return factorize(column, **kwargs)

    monkeypatch.setattr(f"{module}.factorize", spy)
    return seen


@needs_pyarrow
@pytest.mark.parametrize(("form", "locked"), [("object arrays", True), ("lists", True), ("tuples", True),
                                                ("object frame", True), ("python-stored strings", True),
                                                ("numpy strings", True), ("numpy bytes", True),
                                                ("arrow frame", False), ("arrow table", False),
                                                ("categoricals", False)])
def test_id_columns_of_python_objects_are_coded_without_threads(threads, monkeypatch, form, locked):
    # the build codes its columns one after another exactly when two or more of them are read as Python objects;
    # the Ratings are the same either way
    seen = _threads_of_factorize(monkeypatch, "labelgate.core.ratings")
    frame = _ascii_frame(pools=("crowd",))[["item_id", "rater_id", "label"]]
    data = {"object arrays": {c: frame[c].to_numpy(dtype=object) for c in frame},
            "lists": {c: frame[c].tolist() for c in frame},
            "tuples": {c: tuple(frame[c].tolist()) for c in frame},
            "object frame": frame.astype(object),
            "python-stored strings": frame.astype({"item_id": pd.StringDtype("python"),
                                                   "rater_id": pd.StringDtype("python")}),
            "numpy bytes": {c: frame[c].to_numpy(dtype=str).astype("S") for c in ("item_id", "rater_id")}
            | {"label": frame["label"].to_numpy()},
            "numpy strings": {c: frame[c].to_numpy(dtype=str) for c in ("item_id", "rater_id")}
            | {"label": frame["label"].to_numpy()},
            "arrow frame": frame,
            "arrow table": pa.Table.from_pandas(frame, preserve_index=False),
            "categoricals": frame.astype({"item_id": "category", "rater_id": "category"})}[form]
    built = lg.Ratings.from_long(data)
    assert len(seen) == 3
    assert (set(seen) == {threading.current_thread().name}) == locked
    monkeypatch.undo()
    reference = lg.Ratings.from_long(frame.astype(object))
    decoded = (lambda ids: [i.decode() for i in ids]) if form == "numpy bytes" else list  # ids stay bytes
    assert decoded(built.item_labels) == list(reference.item_labels)
    assert decoded(built.rater_labels) == list(reference.rater_labels)
    np.testing.assert_array_equal(built.item_codes, reference.item_codes)
    np.testing.assert_array_equal(built.rater_codes, reference.rater_codes)
    np.testing.assert_array_equal(built.value_codes, reference.value_codes)


@pytest.mark.parametrize("raw", ["0", "-1", "two", "1.5"])
def test_a_bad_thread_count_is_refused_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv("LABELGATE_THREADS", raw)
    with pytest.raises(ParameterError, match=f"LABELGATE_THREADS must be a positive integer; got {raw!r}"):
        thread_count()


@needs_pyarrow
@pytest.mark.parametrize("ids", ["strings", "ascii", "dense"])
@pytest.mark.parametrize("seed", range(3))
def test_every_input_form_on_threads_gives_the_reference_ratings(threads, seed, ids):
    assert_every_form_is_the_reference(*random_table(seed, ids=ids))


def test_pools_on_threads_equal_pools_without(threads, monkeypatch):
    frame = _ascii_frame(seed=3)
    on_threads = lg.ratings_by_pool(frame)
    monkeypatch.setenv("LABELGATE_THREADS", "1")
    alone = lg.ratings_by_pool(frame)
    assert list(on_threads) == list(alone)
    for name in alone:
        for attribute in ("item_codes", "rater_codes", "value_codes"):
            assert np.array_equal(getattr(on_threads[name], attribute), getattr(alone[name], attribute))
        assert list(on_threads[name].item_labels) == list(alone[name].item_labels)
        assert list(on_threads[name].rater_labels) == list(alone[name].rater_labels)


@needs_pyarrow
def test_the_first_pool_in_order_names_its_error_on_threads(threads):
    frame = pa.table({"item_id": ["a", "a", "b", "b"], "rater_id": ["x", "x", "y", "y"], "label": [1, 2, 1, 1],
                      "pool": ["first", "first", "second", "second"]})
    with pytest.raises(InputError, match="Rater 'x' judged item 'a' more than once"):
        lg.ratings_by_pool(frame)


def test_the_panel_on_threads_equals_the_panel_without(threads, monkeypatch):
    pools = lg.ratings_by_pool(_ascii_frame(seed=5))
    on_threads = metrics_panel(pools, ci=0.95, n_boot=200, seed=3)
    monkeypatch.setenv("LABELGATE_THREADS", "1")
    alone = metrics_panel(lg.ratings_by_pool(_ascii_frame(seed=5)), ci=0.95, n_boot=200, seed=3)
    assert {group: {name: est.to_dict() for name, est in row.items()} for group, row in on_threads.items()} == \
           {group: {name: est.to_dict() for name, est in row.items()} for group, row in alone.items()}


# ------------------------------------------------------------------ review findings
def test_items_per_rating_never_asks_for_a_count_table_beyond_the_limit(monkeypatch):
    from labelgate.core import statistics

    r = lg.Ratings.from_wide([[0, 1, 2], [1, 1, None], [2, 0, 1], [0, 0, 0]])
    monkeypatch.setattr(statistics, "MAX_COUNT_CELLS", 5)  # 4 items x 3 categories: over the limit
    assert r.n_rated_items == 4 and r.ratings_per_item.tolist() == [3, 2, 3, 3]
    with pytest.raises(InputError, match="too many cells"):
        _ = r.item_counts


@needs_pyarrow
def test_a_built_ratings_keeps_only_the_distinct_ids_of_its_input():
    ids = [f"i{k:07d}" for k in range(20_000)]
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 200_000)
    before = pa.total_allocated_bytes()  # Arrow's allocations only (the label column stays numpy's)
    table = pa.table({"item_id": [ids[k] for k in rng.integers(0, len(ids), 200_000)],
                      "rater_id": [f"w{k:05d}" for k in range(200_000)], "label": labels})
    r = lg.Ratings.from_long(table)
    column_bytes = table.column("item_id").nbytes
    del table
    kept = pa.total_allocated_bytes() - before
    assert not r.item_index.ready and kept < column_bytes / 3  # not the input column: its distinct values only
    assert sorted(r.item_labels) == sorted(set(r.item_labels)) and len(r.item_labels) == r.n_items


def test_shared_uniques_and_an_index_are_made_once_when_threads_read_them_together():
    from labelgate.core.column import Column

    calls, gate, second_maker = [], threading.Barrier(2, timeout=30), threading.Event()

    def make():
        calls.append(1)
        if len(calls) > 1:
            second_maker.set()
        else:  # hold the first maker until a second one starts (it never does under the lock: a bounded wait)
            second_maker.wait(timeout=1)
        return np.asarray(["a", "b"], dtype=object)

    column = Column.deferred(np.asarray([0, 1]), make, 2)
    index = LabelIndex(make=make, size=2)
    for read in (lambda: column.uniques, lambda: index.labels):
        calls.clear()
        second_maker.clear()

        def reader(read=read):
            gate.wait()
            return read()

        threads_ = [threading.Thread(target=reader) for _ in range(2)]
        for thread in threads_:
            thread.start()
        for thread in threads_:
            thread.join(timeout=30)
        assert calls == [1]


def test_a_bad_thread_count_fails_on_a_small_table_too(monkeypatch):
    monkeypatch.setenv("LABELGATE_THREADS", "²")
    with pytest.raises(ParameterError, match="LABELGATE_THREADS must be a positive integer"):
        lg.Ratings.from_long({"item_id": [1, 1], "rater_id": [1, 2], "label": [0, 1]})


def test_steps_on_threads_see_the_callers_context_variables(monkeypatch):
    import contextvars

    monkeypatch.setenv("LABELGATE_THREADS", "2")
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    marker.set("caller")
    assert run_steps([marker.get, marker.get], rows=parallel.MIN_ROWS) == ["caller", "caller"]


def test_a_pickle_from_before_the_item_index_still_loads():
    r = lg.Ratings.from_wide([[0, 1], [1, 1]])
    state = {key: value for key, value in r.__dict__.items() if key != "item_index"}
    state["item_labels"] = np.asarray(["x", "y"], dtype=object)
    old = lg.Ratings.__new__(lg.Ratings)
    old.__setstate__(state)
    assert old.n_items == 2 and old.item_labels.tolist() == ["x", "y"]
    assert float(lg.fleiss_kappa(old)) == float(lg.fleiss_kappa(r))


@pytest.mark.parametrize(("form", "locked"), [("object arrays", True),
                                              pytest.param("arrow frame", False, marks=needs_pyarrow)])
def test_pool_columns_of_python_objects_are_coded_without_threads(threads, monkeypatch, form, locked):
    seen = _threads_of_factorize(monkeypatch, "labelgate.core.pools")
    frame = _ascii_frame()
    data = {"object arrays": {c: frame[c].to_numpy(dtype=object) for c in frame}, "arrow frame": frame}[form]
    built = lg.ratings_by_pool(data)
    assert len(seen) == 4  # the item, rater, label and pool columns
    assert (set(seen) == {threading.current_thread().name}) == locked
    monkeypatch.undo()
    reference = lg.ratings_by_pool(frame.astype(object))
    for name, ratings in reference.items():
        assert list(built[name].item_labels) == list(ratings.item_labels)
        np.testing.assert_array_equal(built[name].item_codes, ratings.item_codes)
        np.testing.assert_array_equal(built[name].rater_codes, ratings.rater_codes)
        np.testing.assert_array_equal(built[name].value_codes, ratings.value_codes)


@needs_pyarrow
def test_columns_coded_as_python_objects_are_told_apart_from_the_others():
    # what factorize codes value by value as Python objects (made objects first, or hashed by pandas' object
    # route) against what it codes from codes, buffers or numbers
    strings = ["a", "bc", "a"]
    dates = np.array(["2026-01-01", "2026-01-02"], dtype="datetime64[D]")
    objects = [strings, tuple(strings), np.array(strings, dtype=object), np.array(strings), np.array(strings, "S"),
               dates, np.array([1 + 2j]), pd.Series(strings, dtype=object), pd.Series(strings, dtype="string[python]")]
    if "na_value" in inspect.signature(pd.StringDtype).parameters:  # pandas < 3 has no python-stored NaN strings
        objects.append(pd.Series(strings, dtype=pd.StringDtype("python", na_value=np.nan)))
    others = [np.arange(3), np.array([0.5]), np.array([True]), pd.Series([1, 2]), pd.Series(strings, dtype=ARROW_STR),
              pd.Series(strings, dtype="category"), pd.Series(dates), pa.array(strings), pa.chunked_array([strings]),
              pa.array(strings).dictionary_encode(), EncodedColumn(np.array([0, 1, 0]), ["a", "bc"])]
    assert [visits_objects(column) for column in objects] == [True] * len(objects)
    assert [visits_objects(column) for column in others] == [False] * len(others)
