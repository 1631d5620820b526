"""Input validation: pandera schema from the config, quarantine with reasons, the invalid-row policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import labelgate.pipeline.synth as synth
from labelgate.errors import InputError, Reason
from labelgate.pipeline.config import ConfigError, GateConfig
from labelgate.pipeline.sources import question_frame
from labelgate.pipeline.sources.pools import ADDED_COLUMNS
from labelgate.pipeline.validation import (
    all_categories,
    build_schema,
    categories_for,
    validate,
    validate_pools,
    write_quarantine,
)

CATS = {"label": ("neg", "neu", "pos")}


def _cfg(**kw: Any) -> GateConfig:
    return GateConfig.model_validate(kw)


def _table(n: int = 10, pool: str = "crowd") -> pd.DataFrame:
    labels = ["neg", "neu", "pos"]
    return pd.DataFrame({"item_id": [f"i{k // 2}" for k in range(n)], "rater_id": [f"r{k % 2}" for k in range(n)],
                         "label": [labels[k % 3] for k in range(n)], "pool": pool})


def _reasons(result: Any) -> list[str]:
    return result.quarantine["_reasons"].tolist()


# ------------------------------------------------------------------------------------------- realistic data
@pytest.fixture(scope="module")
def simulated() -> pd.DataFrame:
    return synth.simulate(synth.scenario_named("good", 200), seed=0)


def test_clean_simulated_batch_passes(simulated: pd.DataFrame) -> None:
    cfg = GateConfig()
    crowd, trusted = simulated[simulated.pool == "crowd"], simulated[simulated.pool == "trusted"]
    cats = all_categories(cfg, trusted)
    assert cats == CATS
    res_crowd, res_trusted = validate_pools(crowd, trusted, cfg)
    assert (res_crowd.n_invalid, res_trusted.n_invalid) == (0, 0)
    assert res_crowd.passed_policy and res_trusted.passed_policy
    assert res_crowd.n_valid == len(crowd) and res_trusted.n_valid == len(trusted)
    assert "All 606 rows of the crowd table passed" in res_crowd.reason
    pd.testing.assert_index_equal(res_crowd.valid.index, crowd.index)


# ------------------------------------------------------------------------------------------- row failures
def test_unknown_label_is_quarantined_naming_the_value() -> None:
    df = _table()
    df.loc[3, "label"] = "spam"
    res = validate(df, GateConfig(), CATS, pool="crowd")
    assert res.n_invalid == 1 and res.quarantine["_row"].tolist() == [3]
    assert _reasons(res) == ["label: category: 'spam' is not one of the categories ['neg', 'neu', 'pos'] "
                             "of question 'label'"]
    assert res.error_counts == {"label:category": 1}
    assert 3 not in res.valid.index


def test_missing_and_empty_ids() -> None:
    df = _table()
    df.loc[0, "item_id"] = None
    df.loc[1, "rater_id"] = np.nan
    df.loc[2, "rater_id"] = ""
    df.loc[4, "label"] = None
    res = validate(df, GateConfig(), CATS, pool="crowd")
    assert res.quarantine["_row"].tolist() == [0, 1, 2, 4]
    assert _reasons(res) == ["item_id: not_null: missing value", "rater_id: not_null: missing value",
                             "rater_id: non_empty: '' is empty", "label: not_null: missing value (question 'label')"]


def test_every_copy_of_a_duplicate_judgement_is_quarantined() -> None:
    df = _table(6)
    dup = df.iloc[[2]].assign(label="pos")  # same item and rater as row 2, other label
    df = pd.concat([df, dup], ignore_index=True)
    res = validate(df, GateConfig(), CATS, pool="crowd")
    assert res.quarantine["_row"].tolist() == [2, 6]
    assert res.error_counts == {"item_id+rater_id+pool:unique": 2}
    assert _reasons(res)[0] == ("item_id+rater_id+pool: unique: (item_id='i1', rater_id='r0', pool='crowd') "
                                "occurs 2 times; every copy is quarantined")


def test_same_item_and_rater_in_two_pools_is_not_a_duplicate() -> None:
    df = pd.concat([_table(4, "crowd"), _table(4, "trusted")], ignore_index=True)
    res = validate(df, GateConfig(), CATS)  # pool=None: either pool allowed
    assert res.n_invalid == 0


def test_wrong_pool_value() -> None:
    df = _table()
    df.loc[5, "pool"] = "trusted"
    df.loc[6, "pool"] = "expert"
    invalid = _cfg(pools={"unknown": "invalid"})
    res = validate(df, invalid, CATS, pool="crowd")
    assert _reasons(res) == ["pool: pool: 'trusted' is not the expected pool 'crowd'",
                             "pool: pool: 'expert' is not the expected pool 'crowd'"]
    res_any = validate(df, invalid, CATS)
    assert _reasons(res_any) == ["pool: pool: 'expert' is not one of the configured pools ['crowd', 'trusted']"]
    # by default a pool that is not configured is another gate's rows: left out and counted, not quarantined; the
    # other configured pool in the crowd table stays a failure, and an empty pool too
    df.loc[7, "pool"] = ""
    res = validate(df, GateConfig(), CATS, pool="crowd")
    assert _reasons(res) == ["pool: pool: 'trusted' is not the expected pool 'crowd'",
                             "pool: pool: '' is not the expected pool 'crowd'"]
    assert (res.n_rows, res.n_invalid, res.n_valid) == (9, 2, 7) and 6 not in res.valid.index
    assert res.left_out == {"pool 'expert' not configured": 1}
    assert res.reason.endswith("; left out of the measurement: pool 'expert' not configured 1 rows.")


def test_rows_of_unconfigured_pools_are_counted_by_value() -> None:
    df = _table(40)
    df.loc[:29, "pool"] = [f"v{k % 12:02d}" for k in range(30)]  # twelve other pools: ten named, two summed
    df.loc[30, "label"] = "spam"  # an unchecked pool's bad label would not count, a measured one does
    df.loc[0, "label"] = "spam"
    res = validate(df, GateConfig(), CATS, pool="crowd")
    assert (res.n_rows, res.n_invalid) == (10, 1)
    assert res.left_out == {**{f"pool 'v{k:02d}' not configured": 3 for k in range(6)},
                            **{f"pool 'v{k:02d}' not configured": 2 for k in range(6, 10)},
                            "2 more pools not configured": 4}
    only_others = df.iloc[:30]
    with pytest.raises(InputError, match=r"Every row of the crowd table has a pool value outside the configured"):
        validate(only_others, GateConfig(), CATS, pool="crowd")


def test_several_failures_of_one_row_are_all_named() -> None:
    df = _table()
    df.loc[7, ["item_id", "label"]] = [None, "spam"]
    res = validate(df, GateConfig(), CATS, pool="crowd")
    assert res.n_invalid == 1
    assert _reasons(res)[0] == ("item_id: not_null: missing value; label: category: 'spam' is not one of the "
                                "categories ['neg', 'neu', 'pos'] of question 'label'")
    assert res.error_counts == {"item_id:not_null": 1, "label:category": 1}


def test_numeric_levels() -> None:
    cfg = _cfg(questions=[{"name": "score", "level": "interval"}])
    df = _table(8).assign(label=["1", "2.5", "abc", "inf", "-3", "1e1", None, " 4 "])
    res = validate(df, cfg, {"score": None}, pool="crowd")
    assert res.quarantine["_row"].tolist() == [2, 3, 6]
    assert _reasons(res) == ["label: numeric: 'abc' is not a number, but question 'score' is interval",
                             "label: finite: 'inf' is not finite (question 'score')",
                             "label: not_null: missing value (question 'score')"]
    assert res.valid["label"].tolist() == [1.0, 2.5, -3.0, 10.0, 4.0]
    assert res.valid["label"].dtype == np.float64


def test_ratio_and_listed_numeric_categories() -> None:
    cfg = _cfg(questions=[{"name": "n", "level": "ratio", "categories": ["0", 1, 2.0]}])
    cats = all_categories(cfg, _table())
    assert cats == {"n": (0, 1, 2)}
    df = _table(5).assign(label=[0, 1.0, "2", -1, 3])
    res = validate(df, cfg, cats, pool="crowd")
    assert _reasons(res) == ["label: category: -1 is not one of the categories [0, 1, 2] of question 'n'; "
                             "label: non_negative: -1 is negative, but question 'n' is ratio",
                             "label: category: 3 is not one of the categories [0, 1, 2] of question 'n'"]


def test_booleans_are_not_numbers() -> None:
    cfg = _cfg(questions=[{"name": "x", "level": "interval"}])
    res = validate(_table(2).assign(label=pd.Series([True, 1.5], dtype=object)), cfg, pool="crowd")
    assert res.quarantine["_row"].tolist() == [0]


# ------------------------------------------------------------------------------------------- categories
def test_categories_from_trusted_numbers_sorted_numerically() -> None:
    cfg = _cfg(questions=[{"name": "g", "level": "ordinal"}])
    trusted = _table(6, "trusted").assign(label=["10", "2", "1", "2", "10", None])
    assert categories_for(cfg, cfg.questions[0], trusted) == (1, 2, 10)
    # batch labels written differently but meaning the same category are accepted and made canonical
    batch = _table(4).assign(label=[1, "2", 10.0, "3"])
    res = validate(batch, cfg, all_categories(cfg, trusted), pool="crowd")
    assert res.quarantine["_row"].tolist() == [3]
    assert "'3' is not one of the categories [1, 2, 10]" in _reasons(res)[0]
    assert res.valid["label"].tolist() == [1, 2, 10]
    frame = question_frame(res.valid, cfg, cfg.questions[0])
    assert frame["label"].tolist() == [1, 2, 10]


def test_batch_label_outside_the_trusted_labels_fails() -> None:
    trusted = _table(4, "trusted").assign(label=["neg", "pos", "pos", "neg"])
    cats = all_categories(GateConfig(), trusted)
    assert cats == {"label": ("neg", "pos")}
    res = validate(_table(3), GateConfig(), cats, pool="crowd")
    assert res.quarantine["label"].tolist() == ["neu"]


def test_explicit_categories_win_and_interval_has_none() -> None:
    cfg = _cfg(questions=[{"name": "a", "label_column": "a", "categories": ["y", "n"]},
                          {"name": "b", "label_column": "b", "level": "interval"}])
    trusted = pd.DataFrame({"a": ["zzz"], "b": ["1"]})
    assert all_categories(cfg, trusted) == {"a": ("y", "n"), "b": None}


def test_category_errors() -> None:
    ordinal = _cfg(questions=[{"name": "g", "level": "ordinal"}])
    with pytest.raises(ConfigError, match=r"ordinal but its trusted labels \['high', 'low'\].*questions\[0\]"):
        categories_for(ordinal, ordinal.questions[0], _table(2).assign(label=["low", "high"]))
    with pytest.raises(InputError, match="no label for question 'g'"):
        categories_for(ordinal, ordinal.questions[0], _table(2).assign(label=None))
    with pytest.raises(InputError, match="Column 'label'"):
        categories_for(ordinal, ordinal.questions[0], _table(2).drop(columns="label"))
    bad = _cfg(questions=[{"name": "s", "level": "interval", "categories": [1, "x"]}])
    with pytest.raises(ConfigError, match="holds 'x'"):
        categories_for(bad, bad.questions[0], _table())
    dup = _cfg(questions=[{"name": "s", "categories": [1, "1"]}])
    with pytest.raises(ConfigError, match="duplicates"):
        categories_for(dup, dup.questions[0], _table())


# ------------------------------------------------------------------------------------------- policy
@pytest.mark.parametrize(("on_invalid", "share", "n_bad", "passed"), [
    ("reject", 0.5, 0, True),
    ("reject", 0.5, 1, False),      # reject: any invalid row fails, whatever the share
    ("continue", 0.1, 1, True),     # 1/20 = 5% <= 10%
    ("continue", 0.1, 2, True),     # 10% <= 10%
    ("continue", 0.1, 3, False),    # 15% > 10%
    ("continue", 0.0, 1, False),
    ("continue", 1.0, 20, False),   # nothing left to gate
])
def test_policy(on_invalid: str, share: float, n_bad: int, passed: bool) -> None:
    cfg = _cfg(validation={"on_invalid": on_invalid, "max_invalid_share": share})
    df = _table(20)
    df.loc[: n_bad - 1, "label"] = "spam"
    res = validate(df, cfg, CATS, pool="crowd")
    assert res.n_invalid == n_bad and res.invalid_share == pytest.approx(n_bad / 20)
    assert res.passed_policy is passed
    if n_bad == 20:
        assert "no valid row remains" in res.reason
    elif n_bad and not passed:
        assert "the crowd table fails the policy" in res.reason and f"{n_bad} of 20 rows" in res.reason and "label:category" in res.reason
    elif n_bad:
        assert "continuing without them" in res.reason


def test_trusted_table_is_reported_separately() -> None:
    cfg = _cfg(validation={"on_invalid": "continue", "max_invalid_share": 0.2})
    crowd, trusted = _table(10), _table(10, "trusted")
    trusted.loc[0, "item_id"] = None
    res_crowd, res_trusted = validate_pools(crowd, trusted, cfg)
    assert (res_crowd.n_invalid, res_trusted.n_invalid) == (0, 1)
    assert res_trusted.table == "trusted" and "of the trusted table" in res_trusted.reason
    assert res_trusted.to_dict()["error_counts"] == {"item_id:not_null": 1}


# ------------------------------------------------------------------------------------------- nothing silent
@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["ok", "spam", "no_item", "empty_rater", "dup", "no_label"]),
                min_size=1, max_size=25))
def test_nothing_is_dropped_silently(kinds: list[str]) -> None:
    rows, expected_bad = [], set()
    for k, kind in enumerate(kinds):
        item, rater, label = f"i{k}", "r", "pos"
        if kind == "spam":
            label = "spam"
        elif kind == "no_item":
            item = None
        elif kind == "empty_rater":
            rater = ""
        elif kind == "no_label":
            label = None
        rows.append((item, rater, label))
        if kind != "ok":
            expected_bad.add(len(rows) - 1)
        if kind == "dup":
            rows.append((item, rater, "neg"))
            expected_bad.add(len(rows) - 1)
    df = pd.DataFrame(rows, columns=["item_id", "rater_id", "label"]).assign(pool="crowd")
    df.index = df.index * 10 + 5  # a non-default index is reported as it is
    res = validate(df, GateConfig(), CATS, pool="crowd")
    assert res.n_valid + res.n_invalid == res.n_rows == len(df)
    assert set(res.quarantine["_row"]) == {df.index[i] for i in expected_bad}
    assert sorted([*res.valid.index, *res.quarantine["_row"]]) == sorted(df.index)
    assert res.quarantine["_reasons"].str.len().min() > 0 if res.n_invalid else True


# ------------------------------------------------------------------------------------------- quarantine file
def test_quarantine_file(tmp_path: Path) -> None:
    df = _table(6).assign(extra=range(6))
    df.loc[1, "label"] = "spam"
    df.loc[4, "item_id"] = None
    res = validate(df, GateConfig(), CATS, pool="crowd")
    path = write_quarantine(res, tmp_path / "reports", "run-7-crowd")
    assert path == tmp_path / "reports" / "run-7-crowd.quarantine.csv"
    back = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert list(back.columns) == ["_row", "item_id", "rater_id", "label", "pool", "extra", "_reasons"]
    assert back["_row"].tolist() == ["1", "4"]
    assert back["label"].tolist() == ["spam", "neu"]  # original values
    assert back["item_id"].tolist() == ["i0", ""]
    assert back["_reasons"].tolist() == _reasons(res)
    clean = validate(_table(6), GateConfig(), CATS, pool="crowd")
    assert write_quarantine(clean, tmp_path / "reports", "clean") is None
    assert not (tmp_path / "reports" / "clean.quarantine.csv").exists()


# ------------------------------------------------------------------------------------------- table-level errors
def test_empty_table_and_missing_column() -> None:
    with pytest.raises(InputError, match="crowd table is empty") as info:
        validate(_table(0), GateConfig(), CATS, pool="crowd")
    assert info.value.code is Reason.EMPTY_INPUT
    with pytest.raises(InputError, match=r"Column 'rater_id' \(the rater column\) is missing") as info:
        validate(_table().drop(columns="rater_id"), GateConfig(), CATS, pool="crowd")
    assert info.value.code is Reason.MISSING_COLUMN and info.value.context["column"] == "rater_id"
    cfg = _cfg(questions=[{"name": "tox", "label_column": "toxic"}])
    with pytest.raises(InputError, match="'toxic' \\(the label column of question 'tox'\\)"):
        validate(_table(), cfg, pool="crowd")


def test_layout_config_errors() -> None:
    same = _cfg(questions=[{"name": "a"}, {"name": "b"}])
    with pytest.raises(ConfigError, match="Several questions read the label column 'label'"):
        validate(_table(), same, pool="crowd")
    value_without_column = _cfg(questions=[{"name": "a", "question_value": "x"}])
    with pytest.raises(ConfigError, match=r"questions\[0\].question_value is set"):
        validate(_table(), value_without_column, pool="crowd")


# ------------------------------------------------------------------------------------------- layouts
def test_question_column_layout() -> None:
    cfg = _cfg(columns={"question": "q"}, questions=[{"name": "sent"}, {"name": "score", "level": "interval"}])
    df = pd.DataFrame({"item_id": ["1"] * 5, "rater_id": ["a", "a", "b", "b", "a"],
                       "label": ["pos", "3", "meh", "x", "anything"], "pool": "crowd",
                       "q": ["sent", "score", "sent", "score", "other"]})
    trusted = df.iloc[[0, 1]].assign(pool="trusted")
    cats = all_categories(cfg, trusted)
    assert cats == {"sent": ("pos",), "score": None}
    res = validate(df, cfg, cats, pool="crowd")
    assert res.quarantine["_row"].tolist() == [2, 3]
    assert res.error_counts == {"label:category": 1, "label:numeric": 1}
    assert list(res.valid.index) == [0, 1, 4]  # a question not in the config: ids checked, row kept, unused
    assert question_frame(res.valid, cfg, cfg.questions[1])["label"].tolist() == [3.0]
    # (item, rater) may repeat across questions, not within one
    dup = pd.concat([df.iloc[[0, 1]], df.iloc[[0]]], ignore_index=True)
    res_dup = validate(dup, cfg, cats, pool="crowd")
    assert res_dup.quarantine["_row"].tolist() == [0, 2]
    assert "item_id+rater_id+pool+q: unique" in _reasons(res_dup)[0]
    with pytest.raises(InputError, match="no row for question 'score'"):
        validate(df[df.q != "score"], cfg, cats, pool="crowd")


def test_label_column_layout_allows_unanswered_questions() -> None:
    cfg = _cfg(questions=[{"name": "a", "label_column": "la"}, {"name": "b", "label_column": "lb"}])
    df = pd.DataFrame({"item_id": ["1", "1", "2"], "rater_id": ["x", "y", "x"], "la": ["p", None, "q"],
                       "lb": ["u", "v", "w"], "pool": "crowd"})
    res = validate(df, cfg, {"a": ("p", "q"), "b": ("u", "v")}, pool="crowd")
    assert res.quarantine["_row"].tolist() == [2]
    assert _reasons(res) == ["lb: category: 'w' is not one of the categories ['u', 'v'] of question 'b'"]
    assert question_frame(res.valid, cfg, cfg.questions[0])["rater_id"].tolist() == ["x"]


def test_build_schema() -> None:
    cfg = _cfg(columns={"question": "q"}, questions=[{"name": "s"}])
    schema = build_schema(cfg, cfg.questions[0], ["a", "b"], pool="crowd")
    assert set(schema.columns) == {"item_id", "rater_id", "pool", "q", "label"}
    assert schema.unique == ["item_id", "rater_id", "pool", "q"]
    good = pd.DataFrame({"item_id": [1, 2], "rater_id": ["r", "r"], "pool": "crowd", "q": "s", "label": ["a", "b"]})
    out = schema.validate(good)
    assert out["item_id"].tolist() == ["1", "2"]  # ids coerced to text
    import pandera.pandas as pa

    with pytest.raises(pa.errors.SchemaErrors):
        schema.validate(good.assign(label=["a", "c"]), lazy=True)


def test_rows_without_a_judgement_are_counted_with_their_cause() -> None:
    cfg = GateConfig.model_validate({"questions": [{"name": "a", "label_column": "a"},
                                                   {"name": "b", "label_column": "b"}]})
    df = pd.DataFrame({"item_id": ["1", "2", "3", "4"], "rater_id": "r", "pool": "trusted",
                       "a": ["x", None, None, "y"], "b": ["y", "y", None, None]})
    res = validate(df, cfg, {"a": ("x", "y"), "b": ("x", "y")}, pool="trusted")
    assert res.n_invalid == 0 and res.left_out == {"label empty (question 'a')": 2, "label empty (question 'b')": 2}
    # "all rows passed" never stands alone while rows are left out of the measurement
    assert res.reason == ("All 4 rows of the trusted table passed validation; left out of the measurement: label "
                          "empty (question 'a') 2 rows, label empty (question 'b') 2 rows.")
    assert res.to_dict()["left_out"] == res.left_out
    long = GateConfig.model_validate({"columns": {"question": "q"}, "questions": [{"name": "a"}]})
    rows = pd.DataFrame({"item_id": ["1", "2", "3"], "rater_id": "r", "pool": "crowd", "label": "x",
                         "q": ["a", "zz", "zz"]})
    assert validate(rows, long, {"a": ("x",)}, pool="crowd").left_out == {"question 'zz' not configured": 2}


def test_a_column_the_loader_added_is_never_named() -> None:
    df = _table(6).drop(columns="pool")
    df = pd.concat([df, df.iloc[[2]]], ignore_index=True)
    df["pool"] = "crowd"
    df.attrs[ADDED_COLUMNS] = ["pool"]  # as load_selected marks a file without a pool column
    res = validate(df, GateConfig(), CATS, pool="crowd")
    assert res.error_counts == {"item_id+rater_id:unique": 2}
    assert "pool" not in _reasons(res)[0] and "pool" not in res.quarantine.columns
