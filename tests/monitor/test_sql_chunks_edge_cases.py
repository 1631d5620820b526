"""The monitor's chunked SQL source against what a review found: times compared in UTC (PostgreSQL), timestamps out of
time order refused (SQLite spellings, offsets), one read per pass that a change of the source between chunks cannot
shift, a source table inside the store's own SQLite file, a chunk ending inside a run of equal timestamps, a pass
stopped in its measuring transaction, and queries ending on comments after ``;``. SQLite and PostgreSQL where it
applies (``sql_url``; PostgreSQL skipped without the test server).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import create_engine, select, text

from labelgate.errors import InputError
from labelgate.monitor import Monitor, intake, monitor_config_from_dict, window_pass
from labelgate.monitor.engine import Monitor as EngineMonitor
from labelgate.pipeline.sources.sql import bare_query
from labelgate.pipeline.tables import judgements_table, windows_table
from tests.conftest import postgres_database
from tests.monitor.test_sql_chunks import ENV, assert_state, config, judgements, one_read, snapshot


@pytest.fixture
def source(sql_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """As ``source`` in ``test_sql_chunks``: a table of its own on the SQLite file or the PostgreSQL server
    (dropped afterwards); ``write(frame)`` appends rows to it."""
    monkeypatch.setenv(ENV, sql_url)
    name = f"lg_chunks_{uuid.uuid4().hex[:10]}"
    engine = create_engine(sql_url)

    def write(frame: pd.DataFrame) -> None:
        with engine.begin() as conn:
            frame.assign(timestamp=pd.to_datetime(frame["timestamp"], utc=True)).to_sql(
                name, conn, index=False, if_exists="append")

    yield {"name": name, "write": write, "url": sql_url}
    with engine.begin() as conn:
        conn.execute(text(f'DROP TABLE IF EXISTS "{name}"'))
    engine.dispose()


def same_state(a: dict[str, Any], b: dict[str, Any]) -> None:
    """:func:`assert_state`, where a cumulative interval may be missing (None) in both (small tables)."""

    def filled(state: dict[str, Any]) -> dict[str, Any]:
        nan = float("nan")
        windows = [{**w, **{k: nan for k in ("ci_low", "ci_high") if w[k] is None}} if w["scope"] == "cumulative"
                   else w for w in state["windows"]]
        return {**state, "windows": windows}

    assert_state(filled(a), filled(b))


def cumulative_rows(monitor: Monitor) -> int:
    w = windows_table
    with monitor.engine.connect() as conn:
        return len(conn.execute(select(w.c.row_id).where(w.c.scope == "cumulative")).all())


def merged_keys(monitor: Monitor) -> set[tuple[str, str]]:
    j = judgements_table
    with monitor.engine.connect() as conn:
        return {(row.item_id, row.rater_id) for row in conn.execute(select(j.c.item_id, j.c.rater_id))}


def stop_in_chunk(monkeypatch: pytest.MonkeyPatch, k: int) -> None:
    """Make the (k+1)-th transaction of the next pass fail after its merge (nothing of it is committed)."""
    advance, calls = intake.advance_source_watermark, []

    def failing(conn: Any, cfg: Any, accepted: Any) -> Any:
        calls.append(1)
        if len(calls) == k + 1:
            raise RuntimeError("the process stops")
        return advance(conn, cfg, accepted)

    monkeypatch.setattr(intake, "advance_source_watermark", failing)


# --- 1. PostgreSQL: a timestamp column without zone, in a session whose time zone is not UTC -----------------------


@pytest.mark.parametrize("kind", ["timestamp", "timestamptz"])
def test_postgres_reads_naive_timestamps_as_utc_whatever_the_session_time_zone(tmp_path, monkeypatch, kind):
    data = judgements(seed=21).dropna(subset=["timestamp"])
    data["timestamp"] = pd.to_datetime(data["timestamp"], utc=True)
    with postgres_database("lg_chunks_tz") as url:
        engine = create_engine(url)
        with engine.begin() as conn:  # the database's default time zone, as an administrator may set it
            conn.execute(text(f"ALTER DATABASE {url.rsplit('/', 1)[1]} SET timezone TO 'Asia/Tokyo'"))
        engine.dispose()
        engine = create_engine(url)
        with engine.begin() as conn:
            assert conn.execute(text("SHOW timezone")).scalar() == "Asia/Tokyo"
            conn.execute(text(f"CREATE TABLE src (item_id text, rater_id text, label text, pool text, "
                              f"timestamp {kind})"))
            # a naive column holds the UTC wall times (as parse_timestamps reads naive times)
            stamps = (data["timestamp"].dt.tz_localize(None) if kind == "timestamp" else data["timestamp"])
            rows = data.assign(timestamp=list(stamps.dt.to_pydatetime()))[
                ["item_id", "rater_id", "label", "pool", "timestamp"]].to_dict("records")
            conn.execute(text("INSERT INTO src VALUES (:item_id, :rater_id, :label, :pool, :timestamp)"), rows)
        engine.dispose()
        monkeypatch.setenv(ENV, url)
        expected = one_read(tmp_path, data, table="src")
        stop_in_chunk(monkeypatch, 6)
        monitor = Monitor(config(tmp_path, "stopped", 37, table="src"))
        with pytest.raises(RuntimeError, match="stops"):
            monitor.run_pass(send_alerts=False)
        monkeypatch.undo()
        monkeypatch.setenv(ENV, url)
        resumed = monitor.run_pass(send_alerts=False)
        assert 0 < resumed["rows"] < len(data)
        same_state(snapshot(monitor), expected)


# --- 1/3. fail closed: timestamps whose database order is not their time order ---------------------------------------


def write_text_stamps(url: str, name: str, data: pd.DataFrame, spellings: list[str]) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        data.assign(timestamp=spellings).to_sql(name, conn, index=False)
    engine.dispose()


def small(n: int = 40) -> pd.DataFrame:
    data = judgements(seed=3).dropna(subset=["timestamp"]).iloc[:n].copy()
    data["timestamp"] = [pd.Timestamp("2026-01-05", tz="UTC") + pd.Timedelta(minutes=10 * k) for k in range(n)]
    return data


def test_sqlite_timestamps_in_mixed_spellings_are_refused_naming_the_row(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'src.db'}"
    monkeypatch.setenv(ENV, url)
    data = small()
    # 'T' sorts after ' ': the 'T' rows of a day come after every ' ' row of that day, out of time order
    spellings = [t.strftime("%Y-%m-%dT%H:%M:%S" if k % 2 else "%Y-%m-%d %H:%M:%S") for k, t in
                 enumerate(data["timestamp"])]
    write_text_stamps(url, "src", data, spellings)
    monitor = Monitor(config(tmp_path, "mixed", 7, table="src"))
    with pytest.raises(InputError, match=r"not in time order: row \d+ .*'2026-01-05 \d\d:\d\d:\d\d'") as err:
        monitor.run_pass(send_alerts=False)
    assert "one spelling" in str(err.value)
    assert not merged_keys(monitor)  # refused before anything was merged (the read is checked as a whole first)


def test_sqlite_text_timestamps_with_an_offset_are_refused(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'src.db'}"
    monkeypatch.setenv(ENV, url)
    data = small()
    spellings = [t.tz_convert("America/New_York").isoformat() for t in data["timestamp"]]  # ...-05:00, in order
    write_text_stamps(url, "src", data, spellings)
    with pytest.raises(InputError, match=r"'2026-01-04T19:00:00-05:00' \(row 1 .*UTC offset"):
        Monitor(config(tmp_path, "offsets", 7, table="src")).run_pass(send_alerts=False)
    # one spelling of UTC text ('Z' or '+00:00' included) is read as before
    url2 = f"sqlite:///{tmp_path / 'src2.db'}"
    monkeypatch.setenv(ENV, url2)
    write_text_stamps(url2, "src", data, [t.isoformat() for t in data["timestamp"]])
    assert Monitor(config(tmp_path, "utc", 7, table="src")).run_pass(send_alerts=False)["rows"] == len(data)


# --- 2. one read per pass: the source changing between chunks loses no row --------------------------------------------


@pytest.mark.parametrize("action", ["update", "delete"])
def test_a_source_changed_between_chunks_loses_no_row(tmp_path, source, monkeypatch, action):
    data = small(40)
    data["timestamp"] = pd.Timestamp("2026-01-05 06:00", tz="UTC")  # one run of equal times longer than chunks
    data.loc[data.index[-6:], "timestamp"] = pd.Timestamp("2026-01-05 07:00", tz="UTC")
    data = data.drop_duplicates(subset=["item_id", "rater_id", "pool"])
    source["write"](data)
    name, engine = source["name"], create_engine(source["url"])
    first = data.sort_values(["item_id", "rater_id"]).iloc[0]
    step, calls = EngineMonitor._merge_step, []

    def changing(self: Any, deliveries: Any, *args: Any, **kwargs: Any) -> Any:
        out = step(self, deliveries, *args, **kwargs)
        calls.append(1)
        if len(calls) == 1:  # after the first chunk is committed: change a row of that chunk
            with engine.begin() as conn:
                where = f"WHERE item_id = '{first.item_id}' AND rater_id = '{first.rater_id}'"
                conn.execute(text(f'UPDATE "{name}" SET item_id = \'moved\' {where}' if action == "update"
                                  else f'DELETE FROM "{name}" {where}'))
        return out

    monkeypatch.setattr(EngineMonitor, "_merge_step", changing)
    monitor = Monitor(config(tmp_path, "changed", 6, table=name))
    summary = monitor.run_pass(send_alerts=False)
    engine.dispose()
    assert len(calls) > 3 and summary["rows"] == len(data)  # the pass read what the table held when it began
    keys = merged_keys(monitor)
    expected = {(r.item_id, r.rater_id) for r in data.dropna(subset=["label"]).itertuples()}
    assert keys == expected  # every row present for the whole pass is merged (none lost to a shifted page)


def test_a_source_table_in_the_stores_own_sqlite_file(tmp_path, monkeypatch):
    # the source table lives in the store's database file: the read must not hold a lock over the store's commits
    store = tmp_path / "shared.db"
    monkeypatch.setenv(ENV, f"sqlite:///{store}")
    data = judgements(seed=4)
    engine = create_engine(f"sqlite:///{store}")
    with engine.begin() as conn:
        data.assign(timestamp=pd.to_datetime(data["timestamp"], utc=True)).to_sql("src", conn, index=False)
    engine.dispose()
    cfg = monitor_config_from_dict({
        "store": {"url": f"sqlite:///{store}"},
        "columns": {"timestamp": "timestamp"},
        "monitor": {"source": {"kind": "sql", "url_env": ENV, "chunk_rows": 53, "table": "src"},
                    "window": {"hours": 1}, "n_boot": 50},
    })
    monitor = Monitor(cfg)
    summary = monitor.run_pass(send_alerts=False)
    assert len(summary["steps"]) > 5 and summary["rows"] == len(data)
    same_state(snapshot(monitor), one_read(tmp_path, data, table="src"))


# --- 2. a chunk ending inside a run of equal timestamps; the pass stopped there resumes ------------------------------


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_pass_stopped_inside_a_run_of_equal_timestamps_resumes_exactly(tmp_path, source, monkeypatch, k):
    data = judgements(seed=8, n_items=60).dropna(subset=["timestamp"]).iloc[:120].copy()
    base = pd.Timestamp("2026-01-05 06:00", tz="UTC")
    # runs of 25 equal times; chunks of 10: every chunk boundary but one falls inside a run
    data["timestamp"] = [base + pd.Timedelta(minutes=20 * (i // 25)) for i in range(len(data))]
    source["write"](data)
    expected = one_read(tmp_path, data, table=source["name"])
    stop_in_chunk(monkeypatch, k)
    monitor = Monitor(config(tmp_path, "stopped", 10, table=source["name"]))
    with pytest.raises(RuntimeError, match="stops"):
        monitor.run_pass(send_alerts=False)
    monkeypatch.undo()
    monkeypatch.setenv(ENV, source["url"])
    assert len(merged_keys(monitor)) > 0
    resumed = monitor.run_pass(send_alerts=False)
    # the run at the watermark is read again, its merged rows recognised, none merged twice
    assert resumed["rows"] > len(data) - 10 * k
    same_state(snapshot(monitor), expected)


# --- 4. a pass stopped in its measuring transaction ----------------------------------------------------------------


def test_a_pass_stopped_while_measuring_records_its_cumulative_point_on_rerun(tmp_path, source, monkeypatch):
    data = small(34)
    data["timestamp"] = [pd.Timestamp("2026-01-05 06:00", tz="UTC") if k < 17
                         else pd.Timestamp("2026-01-05 08:00", tz="UTC") for k in range(len(data))]
    source["write"](data)
    expected = one_read(tmp_path, data, table=source["name"])
    monitor = Monitor(config(tmp_path, "measuring", 17, table=source["name"]))

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("stopped while measuring")

    monkeypatch.setattr(window_pass, "measure_windows", failing)
    with pytest.raises(RuntimeError, match="while measuring"):
        monitor.run_pass(send_alerts=False)
    monkeypatch.undo()
    monkeypatch.setenv(ENV, source["url"])
    assert cumulative_rows(monitor) == 0 and merged_keys(monitor)  # every chunk committed, nothing measured
    rerun = monitor.run_pass(send_alerts=False)
    assert rerun["n_new"] == 0
    assert cumulative_rows(monitor) == 5  # the point the stopped pass did not record
    same_state(snapshot(monitor), expected)
    monitor.run_pass(send_alerts=False)  # a pass that merges nothing records nothing
    assert cumulative_rows(monitor) == 5


# --- 5. queries ending on comments after ';' --------------------------------------------------------------------------


@pytest.mark.parametrize("tail", ["; -- the monitor's source", "; /* v2 */", ";\n-- one\n/* two */ ;  -- three\n"])
def test_a_query_ending_on_a_comment_after_a_semicolon_is_read(tmp_path, source, monkeypatch, tail):
    data = small(30)
    source["write"](data)
    query = f'SELECT * FROM "{source["name"]}" WHERE timestamp >= :watermark {tail}'
    summary = Monitor(config(tmp_path, f"q{uuid.uuid4().hex[:6]}", 7, query=query)).run_pass(send_alerts=False)
    assert summary["rows"] == len(data)


def test_bare_query_strips_only_what_trails():
    assert bare_query("SELECT 1 ; -- c") == "SELECT 1"
    assert bare_query("SELECT 1; /* v2 */ ") == "SELECT 1"
    assert bare_query("SELECT '--x;' AS a -- c\n ;") == "SELECT '--x;' AS a"
    assert bare_query("SELECT 1\n-- a\n/* b */;;") == "SELECT 1"
    # a string or a quoted name holding "--", ";" or "/*" on a line of its own is code; what the scan cannot read
    # (an unclosed quote or comment) is kept, for the database to refuse
    assert bare_query("SELECT 'a\n-- b;' AS x ;\n") == "SELECT 'a\n-- b;' AS x"
    assert bare_query('SELECT 1 AS "a--b;/*" -- c') == 'SELECT 1 AS "a--b;/*"'
    assert bare_query("SELECT 'it''s' /* c */ ; -- d") == "SELECT 'it''s'"
    assert bare_query("SELECT 1 /* open ;") == "SELECT 1 /* open ;"
    assert bare_query("SELECT 'open ; -- c") == "SELECT 'open ; -- c"
    assert bare_query("SELECT 1; SELECT 2;") == "SELECT 1; SELECT 2"  # only what trails
