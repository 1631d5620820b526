"""Loading the gate's tables: CSV / Parquet / SQL, one file or two, content hash, per-question frames."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labelgate.errors import InputError, Reason
from labelgate.pipeline.config import Columns, GateConfig, Source
from labelgate.pipeline.sources import combined, content_hash, load_pools, load_table, question_frame

HAS_PYARROW = importlib.util.find_spec("pyarrow") is not None
COLS = Columns()


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def long_csv(tmp_path: Path) -> Path:
    return _write(tmp_path / "batch.csv",
                  "item_id,rater_id,label\n007,r1,pos\n007,r2,NA\n8,r1,\n,r3,neg\n")


# ------------------------------------------------------------------------------------------------ CSV
def test_csv_ids_stay_text_and_only_empty_cells_are_missing(long_csv: Path) -> None:
    df = load_table(Source(), long_csv, columns=COLS)
    assert df["item_id"].tolist()[:3] == ["007", "007", "8"]
    assert pd.isna(df["item_id"].iloc[3])
    assert df["label"].iloc[1] == "NA"  # a label, not a missing value
    assert pd.isna(df["label"].iloc[2])
    assert list(df.index) == [0, 1, 2, 3]


def test_config_path_is_used_when_no_path_is_given(long_csv: Path) -> None:
    df = load_table(Source(path=str(long_csv)), columns=COLS)
    assert len(df) == 4


def test_tsv_and_compressed_csv(tmp_path: Path) -> None:
    _write(tmp_path / "t.tsv", "item_id\trater_id\tlabel\n1\ta\tx\n")
    assert load_table(Source(), tmp_path / "t.tsv", columns=COLS)["rater_id"].tolist() == ["a"]
    pd.DataFrame({"item_id": ["01"], "rater_id": ["a"], "label": [1]}).to_csv(tmp_path / "t.csv.gz", index=False)
    df = load_table(Source(), tmp_path / "t.csv.gz", columns=COLS)
    assert df["item_id"].tolist() == ["01"] and df["label"].tolist() == [1]


def test_explicit_format_overrides_the_extension(tmp_path: Path) -> None:
    path = _write(tmp_path / "export.dat", "item_id,rater_id,label\n1,a,x\n")
    with pytest.raises(InputError, match="Cannot tell the format"):
        load_table(Source(), path)
    assert len(load_table(Source(format="csv"), path)) == 1


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.csv"
    with pytest.raises(InputError, match="does not exist") as info:
        load_table(Source(), missing, role="batch")
    assert str(missing) in info.value.message and "batch" in info.value.message
    assert info.value.context["file"] == str(missing)


def test_directory_empty_and_malformed_files(tmp_path: Path) -> None:
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        load_table(Source(), tmp_path / "dir.csv")
    with pytest.raises(InputError, match="is empty"):
        load_table(Source(), _write(tmp_path / "empty.csv", ""))
    with pytest.raises(InputError, match=r"Cannot read the input file .*ragged\.csv.* as CSV"):
        load_table(Source(), _write(tmp_path / "ragged.csv", "a,b\n1,2\n1,2,3,4\n"))
    (tmp_path / "binary.csv").write_bytes(b"item_id,label\n\xff\xfe\xfa,x\n")
    with pytest.raises(InputError, match="binary.csv"):
        load_table(Source(), tmp_path / "binary.csv")


def test_no_source_at_all() -> None:
    with pytest.raises(InputError, match="No trusted table given"):
        load_table(Source(), role="trusted")


# ------------------------------------------------------------------------------------------------ Parquet
@pytest.mark.skipif(not HAS_PYARROW, reason="pyarrow is not installed: Parquet round trip not testable "
                    "(the error path is tested by test_parquet_without_pyarrow_is_a_clear_error)")
def test_parquet_round_trip(tmp_path: Path) -> None:
    frame = pd.DataFrame({"item_id": [7, 7, 8], "rater_id": ["a", "b", "a"], "label": [1.5, 2.0, None]})
    frame.to_parquet(tmp_path / "b.parquet")
    df = load_table(Source(), tmp_path / "b.parquet", columns=COLS)
    assert df["item_id"].tolist() == ["7", "7", "8"]
    assert df["label"].iloc[0] == 1.5 and pd.isna(df["label"].iloc[2])


@pytest.mark.skipif(HAS_PYARROW, reason="pyarrow is installed")
def test_parquet_without_pyarrow_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "b.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(InputError, match="needs pyarrow") as info:
        load_table(Source(), path)
    assert str(path) in info.value.message


# ------------------------------------------------------------------------------------------------ SQL
@pytest.fixture
def sqlite_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from sqlalchemy import create_engine, text

    db = tmp_path / "secret-name.db"
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(text("create table judgements (item_id integer, rater_id text, label text, pool text)"))
        conn.execute(text("insert into judgements values (1, 'a', 'pos', 'crowd'), (1, 'b', 'neg', 'crowd'), "
                          "(1, 't', 'pos', 'trusted'), (2, 'a', 'neg', 'crowd'), (2, 't', 'neg', 'trusted')"))
    engine.dispose()
    monkeypatch.setenv("LG_TEST_DB_URL", f"sqlite:///{db}")
    return db


def test_sql_query_through_env_var(sqlite_env: Path) -> None:
    source = Source(format="sql", query="select * from judgements where pool = 'crowd'", url_env="LG_TEST_DB_URL")
    df = load_table(source, columns=COLS)
    assert len(df) == 3
    assert df["item_id"].tolist() == ["1", "1", "2"]  # integer ids come back as text


def test_sql_one_query_holding_both_pools(sqlite_env: Path) -> None:
    cfg = GateConfig.model_validate({"batch": {"format": "sql", "query": "select * from judgements",
                                               "url_env": "LG_TEST_DB_URL"}})
    crowd, trusted = load_pools(cfg)
    assert (len(crowd), len(trusted)) == (3, 2)


def test_sql_unset_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LG_UNSET_DB_URL", raising=False)
    source = Source(format="sql", query="select 1", url_env="LG_UNSET_DB_URL")
    with pytest.raises(InputError, match="'LG_UNSET_DB_URL'.*is not set") as info:
        load_table(source, role="batch")
    assert info.value.context["env"] == "LG_UNSET_DB_URL"


def test_sql_errors_never_show_the_url(sqlite_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = Source(format="sql", query="select * from no_such_table", url_env="LG_TEST_DB_URL")
    with pytest.raises(InputError, match="no such table") as info:
        load_table(source)
    assert "secret-name" not in str(info.value) and info.value.__suppress_context__
    monkeypatch.setenv("LG_TEST_DB_URL", "notadialect://user:hunter2@host/db")
    with pytest.raises(InputError, match="usable SQLAlchemy URL") as info:
        load_table(source)
    assert "hunter2" not in str(info.value)
    monkeypatch.setenv("LG_TEST_DB_URL", "sqlite:////no/such/dir/hunter2.db")
    with pytest.raises(InputError, match="Cannot connect") as info:
        load_table(source)
    assert "hunter2" not in str(info.value)


def test_cli_path_overrides_a_sql_source(long_csv: Path) -> None:
    source = Source(format="sql", query="select 1", url_env="LG_UNSET_DB_URL")
    assert len(load_table(source, long_csv)) == 4


# ------------------------------------------------------------------------------------------------ pools
@pytest.fixture
def both_csv(tmp_path: Path) -> Path:
    return _write(tmp_path / "both.csv", "item_id,rater_id,label,pool\n"
                  "1,a,pos,crowd\n1,t1,pos,trusted\n2,a,neg,crowd\n2,t1,neg,trusted\n3,b,pos,expert\n")


def test_two_files_get_the_pool_column(tmp_path: Path, long_csv: Path) -> None:
    trusted_path = _write(tmp_path / "trusted.csv", "item_id,rater_id,label\n007,t1,pos\n")
    crowd, trusted = load_pools(GateConfig(), long_csv, trusted_path)
    assert set(crowd["pool"]) == {"crowd"} and set(trusted["pool"]) == {"trusted"}
    assert (len(crowd), len(trusted)) == (4, 1)


def test_two_files_from_the_config_with_custom_pool_values(tmp_path: Path, long_csv: Path) -> None:
    trusted_path = _write(tmp_path / "trusted.csv", "item_id,rater_id,label\n007,t1,pos\n")
    cfg = GateConfig.model_validate({"batch": {"path": str(long_csv)}, "trusted": {"path": str(trusted_path)},
                                     "pools": {"crowd": "workers", "trusted": "experts"}})
    crowd, trusted = load_pools(cfg)
    assert set(crowd["pool"]) == {"workers"} and set(trusted["pool"]) == {"experts"}


def test_an_existing_pool_column_is_kept(tmp_path: Path, both_csv: Path) -> None:
    trusted_path = _write(tmp_path / "trusted.csv", "item_id,rater_id,label\n1,t9,pos\n")
    crowd, _ = load_pools(GateConfig(), both_csv, trusted_path)
    assert len(crowd) == 5  # validation (pool=crowd) quarantines the trusted rows and leaves out the expert ones; none vanish here


@pytest.mark.parametrize("as_both", [False, True])
def test_one_file_with_a_pool_column(both_csv: Path, as_both: bool) -> None:
    crowd, trusted = load_pools(GateConfig(), both_csv, both_csv if as_both else None)
    assert trusted["rater_id"].tolist() == ["t1", "t1"]
    # the unknown pool value 'expert' stays with the batch, for validation to count as left out: nothing vanishes
    assert crowd["pool"].tolist() == ["crowd", "crowd", "expert"]
    assert len(crowd) + len(trusted) == 5
    assert list(crowd.index) == [0, 2, 4] and list(trusted.index) == [1, 3]  # file rows, for tracing


def test_one_file_without_pool_column(long_csv: Path) -> None:
    with pytest.raises(InputError, match="no 'pool' column") as info:
        load_pools(GateConfig(), long_csv)
    assert info.value.code is Reason.MISSING_COLUMN


def test_one_file_with_wrong_pool_values(tmp_path: Path) -> None:
    path = _write(tmp_path / "b.csv", "item_id,rater_id,label,pool\n1,a,x,workers\n1,b,x,experts\n")
    with pytest.raises(InputError, match=r"no row with the value 'trusted'.*\['experts', 'workers'\]"):
        load_pools(GateConfig(), path)


def test_no_batch_given() -> None:
    with pytest.raises(InputError, match="No batch given"):
        load_pools(GateConfig())


def test_combined_table() -> None:
    crowd = pd.DataFrame({"item_id": ["1", "2"], "rater_id": ["a", "a"], "label": ["x", "y"]})
    trusted = pd.DataFrame({"item_id": ["1"], "rater_id": ["t"], "label": ["x"], "pool": ["trusted"]})
    both = combined(crowd, trusted, GateConfig())
    assert both["pool"].tolist() == ["crowd", "crowd", "trusted"]
    assert list(both.index) == [0, 1, 2]
    assert "pool" not in crowd.columns  # inputs are not modified


# ------------------------------------------------------------------------------------------------ hash
def test_content_hash_ignores_row_and_column_order() -> None:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"item_id": [f"i{k}" for k in range(50)], "rater_id": "r", "label": rng.integers(0, 3, 50),
                       "t": pd.date_range("2026-01-01", periods=50, freq="h", tz="UTC")})
    h = content_hash(df)
    assert len(h) == 64
    assert content_hash(df.sample(frac=1.0, random_state=1)) == h
    assert content_hash(df[["t", "label", "rater_id", "item_id"]].reset_index(drop=True)) == h


def test_content_hash_sees_every_change() -> None:
    df = pd.DataFrame({"item_id": ["1", "2"], "label": ["x", "y"]})
    h = content_hash(df)
    assert content_hash(df.assign(label=["x", "z"])) != h
    assert content_hash(df.rename(columns={"label": "answer"})) != h
    assert content_hash(pd.concat([df, df.iloc[[0]]])) != h  # a duplicated row counts
    assert content_hash(df.assign(label=["x", None])) != h
    # values swapped between rows (same multiset per column) are a different table
    assert content_hash(df.assign(label=["y", "x"])) != h


def test_content_hash_agrees_across_read_types(tmp_path: Path) -> None:
    # ids are read as strings whatever the format, so a Parquet and a CSV copy of a table key one decision
    typed = pd.DataFrame({"item_id": [1, 2], "label": ["x", "y"]})
    typed.to_csv(tmp_path / "t.csv", index=False)
    typed.to_parquet(tmp_path / "t.parquet", index=False)
    columns = GateConfig().columns
    from_csv = load_table(Source(), tmp_path / "t.csv", columns=columns)
    assert content_hash(from_csv) == content_hash(load_table(Source(), tmp_path / "t.parquet", columns=columns))


def test_content_hash_tells_a_missing_cell_from_the_text_that_stood_for_it() -> None:
    # encoding 1 wrote a missing cell as "\x00": these two batches were one key (one served the other's decision)
    df = pd.DataFrame({"item_id": ["1", "2", "3", "4"], "label": ["x", "y", "x", "y"]})
    empty, nul = df.assign(item_id=[None, None, None, "4"]), df.assign(item_id=["\x00", "\x00", "\x00", "4"])
    assert content_hash(empty) != content_hash(nul)
    assert content_hash(empty) == content_hash(df.assign(item_id=[np.nan, None, pd.NA, "4"]))  # missing is missing


CELLS = [None, "", "\x00", "1", 1, 1.0, True, "True", "None", "nan", "a\x1fb", "a", "é"]


@pytest.mark.parametrize(("one", "other"), [(a, b) for i, a in enumerate(CELLS) for b in CELLS[i + 1:]],
                         ids=repr)
def test_content_hash_tells_any_two_cell_values_apart(one: object, other: object) -> None:
    # one cell differs, in an object column of other values (types mixed) and as the only value of its column
    base = ["p", "q"]
    assert content_hash(pd.DataFrame({"c": [*base, one]})) != content_hash(pd.DataFrame({"c": [*base, other]}))
    assert content_hash(pd.DataFrame({"c": [one]})) != content_hash(pd.DataFrame({"c": [other]}))


def test_content_hash_tells_types_apart() -> None:
    # the int 1, the float 1.0 and the text "1" may decide differently (a nominal label "1" vs "1.0")
    ints, floats, text = pd.DataFrame({"c": [1, 2]}), pd.DataFrame({"c": [1.0, 2.0]}), pd.DataFrame({"c": ["1", "2"]})
    assert len({content_hash(ints), content_hash(floats), content_hash(text)}) == 3
    # names are length-prefixed: a name holding the old separator is not two columns
    assert content_hash(pd.DataFrame(columns=["a\x1fb"])) != content_hash(pd.DataFrame(columns=["a", "b"]))


@pytest.mark.parametrize("dtype", [object, "string"])
def test_content_hash_reads_every_string_whole_in_any_row_order(dtype) -> None:
    # pandas < 3 factorizes text by C strings that end at a NUL: '', '\x00' and 'a\x00b' shared a code, and the
    # table and its reverse hashed differently. Every value is now hashed whole (in a fixed hash per value).
    values = ["", "\x00", "a\x00b", "a\x00c", "a"]
    df = pd.DataFrame({"item_id": values, "label": ["x"] * 5}).astype(dtype)
    assert content_hash(df) == content_hash(df.iloc[::-1]) == content_hash(df.iloc[[2, 0, 4, 1, 3]])
    hashes = {content_hash(df.assign(item_id=[v] * 5).astype(dtype)) for v in values}
    assert len(hashes) == len(values)
    # pinned: the same table keys the same decision under every supported pandas (and pandas' string dtypes)
    assert content_hash(df)[:16] == PINNED_NUL_TABLE


PINNED_NUL_TABLE = "0bb9ffab64a4742b"


texts = st.one_of(st.none(), st.text(max_size=3), st.sampled_from(["", "\x00", "None", "nan"]))


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(texts, texts), min_size=1, max_size=6), data=st.data())
def test_content_hash_is_injective_on_one_cell_and_stable(rows: list[tuple[str | None, str | None]],
                                                          data: st.DataObject) -> None:
    df = pd.DataFrame(rows, columns=["item_id", "label"], dtype=object)
    assert content_hash(df) == content_hash(df.copy()) == content_hash(df.iloc[::-1])
    row, column = data.draw(st.integers(0, len(rows) - 1)), data.draw(st.sampled_from(["item_id", "label"]))
    value = data.draw(texts.filter(lambda v: v != df.at[row, column]))
    changed = df.copy()
    changed.at[row, column] = value
    assert content_hash(changed) != content_hash(df)


# ------------------------------------------------------------------------------------------------ questions
def test_question_frame_default_layout() -> None:
    cfg = GateConfig.model_validate({"columns": {"item": "doc", "rater": "who", "label": "ans", "pool": "src",
                                                 "timestamp": "ts"}})
    df = pd.DataFrame({"doc": [1, 2], "who": ["a", "b"], "ans": ["x", None], "src": ["crowd", "crowd"],
                       "ts": ["t1", "t2"], "extra": [0, 0]})
    out = question_frame(df, cfg, cfg.questions[0])
    assert list(out.columns) == ["item_id", "rater_id", "label", "pool", "timestamp"]
    assert out["item_id"].tolist() == ["1"] and out["label"].tolist() == ["x"]  # the unlabelled row is no judgement


def test_question_frame_label_columns_and_numeric_levels() -> None:
    cfg = GateConfig.model_validate({"questions": [{"name": "a", "label_column": "la"},
                                                   {"name": "b", "label_column": "lb", "level": "ratio"}]})
    df = pd.DataFrame({"item_id": ["1"], "rater_id": ["r"], "la": ["x"], "lb": ["2.5"], "pool": ["crowd"]})
    assert question_frame(df, cfg, cfg.questions[1])["label"].tolist() == [2.5]
    with pytest.raises(InputError, match="non-numeric value 'oops'") as info:
        question_frame(df.assign(lb=["oops"]), cfg, cfg.questions[1])
    assert info.value.code is Reason.NON_NUMERIC_VALUE
    with pytest.raises(InputError, match="Column 'la' is missing"):
        question_frame(df.drop(columns="la"), cfg, cfg.questions[0])


def test_question_frame_question_column() -> None:
    cfg = GateConfig.model_validate({"columns": {"question": "q"},
                                     "questions": [{"name": "sent"}, {"name": "tox", "question_value": "toxicity"}]})
    df = pd.DataFrame({"item_id": ["1", "1", "1"], "rater_id": ["a", "a", "a"], "label": ["pos", "yes", "z"],
                       "pool": "crowd", "q": ["sent", "toxicity", "other"]})
    assert question_frame(df, cfg, cfg.questions[0])["label"].tolist() == ["pos"]
    tox = question_frame(df, cfg, cfg.questions[1])
    assert tox["label"].tolist() == ["yes"] and list(tox.index) == [1]


@pytest.mark.parametrize(("name", "expected"), [
    ("wk1.bad.csv", "wk1.bad"), ("wk1.good.csv", "wk1.good"), ("batch.csv.gz", "batch"),
    ("wk1.bad.csv.gz", "wk1.bad"), ("/data/b7.TSV", "b7"), ("b.v2.parquet", "b.v2"), ("b.pq.zst", "b"),
    ("notes.json", "notes.json"), ("plain", "plain"), (".csv", ".csv"), (None, "batch"),
])
def test_batch_id_of_strips_only_table_extensions(name: str | None, expected: str) -> None:
    from labelgate.pipeline.sources import batch_id_of

    assert batch_id_of(name) == expected
