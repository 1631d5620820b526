"""The monitor's SQL source read in bounded chunks past the watermark (``monitor.source.chunk_rows``).

Each chunk is merged and committed on its own; the measurements run once at the end of the pass. So a pass over a
table larger than several chunks leaves exactly the state and series of one read of all its rows, runs of equal
timestamps straddling or exceeding a chunk are neither split nor skipped, a pass stopped after some chunks resumes and
ends where an uninterrupted one does, and no read returns more rows than the bound. Every test runs on SQLite and on
the test PostgreSQL server (``sql_url``: skipped without it).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import create_engine, func, select, text

from labelgate.errors import InputError, Reason
from labelgate.monitor import Monitor, intake, monitor_config_from_dict, passes
from labelgate.monitor.raters import expand_rater
from labelgate.pipeline.config import ConfigError
from labelgate.pipeline.sources import deliveries
from labelgate.pipeline.synth import Scenario, simulate
from labelgate.pipeline.tables import (
    deliveries_table,
    detectors_table,
    episodes_table,
    judgements_table,
    monitors_table,
    pair_deltas_table,
    pairs_table,
    raters_table,
    streams_table,
    windows_table,
)

ENV = "LG_TEST_MONITOR_CHUNKS_DB"


def judgements(seed: int = 5, n_items: int = 160) -> pd.DataFrame:
    """Crowd and trusted judgements over 12 hours, with runs of equal timestamps (times on a 5-minute grid), one run
    of 90 rows, re-delivered and conflicting judgements, rows without a label and rows without a timestamp."""
    start = pd.Timestamp("2026-01-05", tz="UTC")
    data = simulate(Scenario(n_items=n_items, start=start.to_pydatetime(), duration_hours=12), seed=seed)
    data["timestamp"] = data["timestamp"].dt.floor("5min")
    data.loc[data.index[200:290], "timestamp"] = start + pd.Timedelta(hours=6, minutes=2)  # a run of 90 rows
    again = data.iloc[:30].copy()  # re-delivered later: 15 the same, 15 with another label
    again["timestamp"] = again["timestamp"] + pd.Timedelta(hours=1)
    again.loc[again.index[15:], "label"] = np.where(again["label"].iloc[15:] == "pos", "neg", "pos")
    data = pd.concat([data, again], ignore_index=True)
    data.loc[data.index[300:304], "label"] = None
    data["timestamp"] = data["timestamp"].astype(object)
    data.loc[data.index[310:313], "timestamp"] = None
    return data


@pytest.fixture
def source(sql_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A table name of its own on the SQLite file or the PostgreSQL server (dropped afterwards); ``write(frame)``
    appends rows to it."""
    monkeypatch.setenv(ENV, sql_url)
    name = f"lg_chunks_{uuid.uuid4().hex[:10]}"
    engine = create_engine(sql_url)

    def write(frame: pd.DataFrame) -> None:
        if "timestamp" in frame.columns:
            frame = frame.assign(timestamp=pd.to_datetime(frame["timestamp"], utc=True))
        with engine.begin() as conn:
            frame.to_sql(name, conn, index=False, if_exists="append")

    yield {"name": name, "write": write, "url": sql_url}
    with engine.begin() as conn:
        conn.execute(text(f'DROP TABLE IF EXISTS "{name}"'))
    engine.dispose()


def config(root: Path, tag: str, chunk_rows: int, **src: Any) -> Any:
    spec = {"kind": "sql", "url_env": ENV, "chunk_rows": chunk_rows, **src}
    return monitor_config_from_dict({
        "store": {"url": f"sqlite:///{root / f'{tag}.db'}"},
        "columns": {"timestamp": "timestamp"},
        "monitor": {"source": spec, "window": {"hours": 1}, "n_boot": 50},
    })


def snapshot(monitor: Monitor) -> dict[str, Any]:
    """Everything the monitor keeps, without what names its passes and deliveries (ids, delivery numbers, times)."""
    s, j, r = streams_table, judgements_table, raters_table
    with monitor.engine.connect() as conn:
        q = len(conn.execute(select(s.c.categories)).scalar_one())  # one nominal question

        def rows(query: Any, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
            return [{k: v for k, v in row.items() if k not in drop} for row in conn.execute(query).mappings()]

        out = {
            "watermark": conn.execute(select(monitors_table.c.source_watermark)).scalar(),
            # the maintained sums ("state") are laid out by the item sizes in the order they appeared, which depends
            # on how the judgements were grouped into merges: they are compared through what they give, the
            # cumulative rows of the series
            "streams": rows(select(s).order_by(s.c.question), ("stream_id", "updated_at", "state")),
            "judgements": rows(select(j).order_by(j.c.item_id, j.c.pool, j.c.rater_id), ("delivery_no",)),
            # a rater's sums are laid out for the categories known when last written: compared laid out for all
            "raters": [
                {**row, "q": None, "sums": expand_rater(np.frombuffer(row["sums"], dtype=np.float64), "nominal",
                                                        row["q"], q).tolist()}
                for row in rows(select(r).order_by(r.c.pool, r.c.rater_id))
            ],
            "windows": rows(
                select(windows_table).order_by(windows_table.c.question, windows_table.c.metric,
                                               windows_table.c.scope, windows_table.c.window_end),
                ("row_id", "pass_id"),
            ),
            "detectors": rows(select(detectors_table).order_by(detectors_table.c.question, detectors_table.c.metric)),
            "episodes": rows(select(episodes_table).order_by(episodes_table.c.episode_id)),
        }
        tallies: dict[tuple[Any, ...], list[int]] = {}
        for table in (pairs_table, pair_deltas_table):  # a pair's total: its main row plus its pending tally
            for row in conn.execute(select(table.c.pool, table.c.rater_a, table.c.rater_b, table.c.n, table.c.agree)):
                total = tallies.setdefault(tuple(row[:3]), [0, 0])
                total[0] += row[3]
                total[1] += row[4]
        out["pairs"] = sorted(tallies.items())
    return out


def assert_same(a: Any, b: Any, where: str = "") -> None:
    """Equal, floats to 1e-12 (sums maintained in another order of additions)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)}"
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{k}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12), (where, a, b)
    else:
        assert a == b, (where, a, b)


def assert_state(a: dict[str, Any], b: dict[str, Any]) -> None:
    """The same monitor state: the window series identical (measured from the same judgements), the rest to 1e-12 but
    the cumulative intervals to 1e-9: their variance is a difference of maintained sums, which another order of the
    same additions changes in the last bits (seen: 1.7e-12 on a bound of 0.95)."""
    cumulative = [[w for w in s["windows"] if w["scope"] == "cumulative"] for s in (a, b)]
    windows = [[w for w in s["windows"] if w["scope"] == "window"] for s in (a, b)]
    assert windows[0] == windows[1]
    assert_same({**a, "windows": None}, {**b, "windows": None})
    assert len(cumulative[0]) == len(cumulative[1])
    for x, y in zip(*cumulative, strict=True):
        assert_same({**x, "ci_low": None, "ci_high": None}, {**y, "ci_low": None, "ci_high": None})
        for key in ("ci_low", "ci_high"):
            assert x[key] == pytest.approx(y[key], rel=1e-9, abs=1e-9, nan_ok=True), (x, key)


def one_read(root: Path, data: pd.DataFrame, **src: Any) -> dict[str, Any]:
    """The state after one pass reading every row at once (a chunk larger than the table)."""
    monitor = Monitor(config(root, "one_read", 10**7, **src))
    summary = monitor.run_pass(send_alerts=False)
    # one read of the rows with a timestamp (those without one come first, in a read of their own)
    assert summary["rows"] == len(data) and len(summary["steps"]) <= 2
    return snapshot(monitor)


def test_a_table_of_many_chunks_leaves_the_state_of_one_read(tmp_path, source):
    data = judgements()
    source["write"](data)
    monitor = Monitor(config(tmp_path, "chunked", 61, table=source["name"]))
    summary = monitor.run_pass(send_alerts=False)
    assert len(summary["steps"]) > 10  # many transactions, each one chunk
    assert summary["rows"] == len(data) and summary["n_new"] > 0
    chunked = snapshot(monitor)
    expected = one_read(tmp_path, data, table=source["name"])
    assert_state(chunked, expected)
    assert [w for w in chunked["windows"] if w["scope"] == "window"]  # the series holds windows, measured once
    assert len([w for w in chunked["windows"] if w["scope"] == "cumulative"]) == 5  # one row per metric: one pass
    # a second pass finds the rows at the watermark again and merges nothing
    again = monitor.run_pass(send_alerts=False)
    assert again["n_new"] == 0 and len(again["steps"]) == 1


def test_equal_timestamps_straddling_and_exceeding_a_chunk(tmp_path, source):
    # runs of 1 to 23 rows at one time, and one of 50: with chunks of 8, runs straddle every boundary and some span
    # several chunks
    rng = np.random.default_rng(11)
    data = judgements(seed=7, n_items=100).iloc[:420].copy()
    runs = rng.integers(1, 24, size=60).tolist()
    sizes = [*runs[:20], 50, *runs[20:]]
    times = np.repeat(np.arange(len(sizes)), sizes)[: len(data)]
    base = pd.Timestamp("2026-01-05", tz="UTC")
    data["timestamp"] = [base + pd.Timedelta(minutes=7 * int(t)) for t in times]
    source["write"](data)
    monitor = Monitor(config(tmp_path, "chunked", 8, table=source["name"]))
    summary = monitor.run_pass(send_alerts=False)
    assert summary["rows"] == len(data)
    assert_state(snapshot(monitor), one_read(tmp_path, data, table=source["name"]))
    # rows arriving later at the watermark's own time are read by the next pass (and only they are new)
    last = data["timestamp"].max()
    late = data.iloc[:12].assign(rater_id=[f"late-{k}" for k in range(12)], timestamp=last)
    source["write"](late)
    assert monitor.run_pass(send_alerts=False)["n_new"] == int((late["label"].notna()).sum())


@pytest.mark.parametrize("k", [2, 6, 11])  # chunk 1 holds the rows without a timestamp
def test_a_pass_stopped_after_k_chunks_resumes_and_ends_as_an_uninterrupted_one(tmp_path, source, monkeypatch, k):
    data = judgements(seed=9)
    source["write"](data)
    cfg = config(tmp_path, "stopped", 61, table=source["name"])
    advance, calls = intake.advance_source_watermark, []

    def failing(conn: Any, config: Any, accepted: Any) -> Any:
        calls.append(1)
        if len(calls) == k + 1:  # inside chunk k+1's transaction, after its merge: it must leave nothing
            raise RuntimeError("the process stops in chunk k+1")
        return advance(conn, config, accepted)

    monkeypatch.setattr(intake, "advance_source_watermark", failing)
    monitor = Monitor(cfg)
    with pytest.raises(RuntimeError, match="stops in chunk"):
        monitor.run_pass(send_alerts=False)
    monkeypatch.setattr(intake, "advance_source_watermark", advance)
    stopped = snapshot(monitor)
    stored = {(row["item_id"], row["pool"], row["rater_id"]) for row in stopped["judgements"]}
    assert stopped["watermark"] is not None and 0 < len(stored)
    with monitor.engine.connect() as conn:  # k chunks committed, the (k+1)-th rolled back
        assert conn.execute(select(func.count()).select_from(deliveries_table)).scalar() == k
    assert not stopped["windows"]  # the measurements wait for the end of the pass
    resumed = monitor.run_pass(send_alerts=False)
    # the resumed pass starts at the stored watermark, not at the beginning
    assert resumed["rows"] < len(data)
    assert_state(snapshot(monitor), one_read(tmp_path, data, table=source["name"]))


def test_a_user_query_is_read_in_chunks_under_the_same_bound(tmp_path, source, monkeypatch):
    data = judgements(seed=13)
    source["write"](data)
    table = source["name"]
    # a query as written by hand: ending on a comment, then a semicolon (the wrapper must survive both)
    query = (f'SELECT * FROM "{table}" WHERE timestamp >= :watermark AND pool IN (\'crowd\', \'trusted\') '
             "-- the monitor's source\n  ;  ")
    sizes = record_reads(monkeypatch)
    monitor = Monitor(config(tmp_path, "query", 53, query=query))
    summary = monitor.run_pass(send_alerts=False)
    assert len(summary["steps"]) > 10 and max(sizes) <= 53
    # the query's own filter holds: from the first pass on, rows without a timestamp are not read
    assert summary["rows"] == int(data["timestamp"].notna().sum())
    expected = Monitor(config(tmp_path, "one_query", 10**7, query=query))
    expected.run_pass(send_alerts=False)
    assert_state(snapshot(monitor), snapshot(expected))
    # later rows: the next pass binds :watermark to the stored watermark and reads only past it
    more = judgements(seed=14, n_items=20).assign(timestamp=lambda f: pd.to_datetime(f["timestamp"], utc=True)
                                                   + pd.Timedelta(days=1))
    more = more.loc[more["timestamp"].notna()]
    source["write"](more)
    sizes.clear()
    second = monitor.run_pass(send_alerts=False)
    stamps = pd.to_datetime(data["timestamp"], utc=True)
    at_watermark = int((stamps == stamps.max()).sum())  # read again, recognised as merged
    assert second["rows"] == len(more) + at_watermark and max(sizes) <= 53


def record_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of rows of every chunk the monitor's SQL source fetches."""
    sizes: list[int] = []
    check = deliveries.SqlChunks._check

    def counted(self: deliveries.SqlChunks, frame: pd.DataFrame) -> None:
        sizes.append(len(frame))
        check(self, frame)

    monkeypatch.setattr(deliveries.SqlChunks, "_check", counted)
    return sizes


def test_no_read_returns_more_rows_than_the_bound(tmp_path, source, monkeypatch):
    data = judgements(seed=17)
    source["write"](data)
    sizes = record_reads(monkeypatch)
    summary = Monitor(config(tmp_path, "bounded", 40, table=source["name"])).run_pass(send_alerts=False)
    assert summary["rows"] == len(data)
    assert len(sizes) > len(data) // 40 and max(sizes) <= 40


def test_each_chunk_is_logged_with_its_rows_and_the_watermark(tmp_path, source, caplog):
    data = judgements(seed=19, n_items=60)
    source["write"](data)
    with caplog.at_level("INFO", logger="labelgate.monitor"):
        summary = Monitor(config(tmp_path, "logged", 50, table=source["name"])).run_pass(send_alerts=False)
    lines = [r.getMessage() for r in caplog.records if "chunk" in r.getMessage()]
    assert len(lines) == len(summary["deliveries"]) > 1 and "source watermark 2026-01-05T" in lines[-1]
    assert sum(int(line.split("(")[1].split(" rows")[0]) for line in lines) == len(data)


def test_a_source_without_the_timestamp_column_is_refused(tmp_path, source):
    data = judgements(seed=3, n_items=10)
    source["write"](data.drop(columns=["timestamp"]).assign(created=data["timestamp"].astype(str)))
    with pytest.raises(InputError, match="no timestamp column 'timestamp'") as caught:
        Monitor(config(tmp_path, "no_ts", 10, table=source["name"])).run_pass(send_alerts=False)
    assert caught.value.code == Reason.MISSING_COLUMN


def test_chunk_rows_is_validated(tmp_path):
    with pytest.raises(ConfigError, match="chunk_rows"):
        config(tmp_path, "zero", 0, table="t")
    with pytest.raises(ConfigError, match="chunk_rows"):
        monitor_config_from_dict({"monitor": {"source": {"path": str(tmp_path), "chunk_rows": 10}}})
    assert config(tmp_path, "default", 10, table="t").monitor.source.chunk_rows == 10
    cfg = monitor_config_from_dict({"columns": {"timestamp": "timestamp"},
                                    "monitor": {"source": {"kind": "sql", "url_env": ENV, "table": "t"}}})
    assert cfg.monitor.source.chunk_rows == 100_000


def test_the_prefect_flow_reads_every_chunk_in_one_run(tmp_path, monkeypatch, prefect_api):
    from labelgate.flows.monitor import monitor_flow

    data = judgements(seed=23, n_items=60)
    url = f"sqlite:///{tmp_path / 'source.db'}"
    monkeypatch.setenv(ENV, url)
    engine = create_engine(url)
    with engine.begin() as conn:
        data.assign(timestamp=pd.to_datetime(data["timestamp"], utc=True)).to_sql("judgements", conn, index=False)
    engine.dispose()
    cfg = config(tmp_path, "flow", 45, table="judgements")
    summary = monitor_flow(cfg.model_dump(mode="json"))
    assert summary["rows"] == len(data) and len(summary["steps"]) > 3
    assert_state(snapshot(Monitor(cfg)), one_read(tmp_path, data, table="judgements"))


def test_the_pass_summary_adds_up_the_invalid_rows_of_every_chunk(tmp_path, source):
    data = judgements(seed=29, n_items=60)
    # rows without an item or of an unknown pool, spread over the table: invalid in several chunks
    data.loc[data.index[[20, 90, 91, 170, 250]], "item_id"] = None
    data.loc[data.index[[40, 130, 210]], "pool"] = "elsewhere"
    source["write"](data)
    invalid = data["label"].notna() & (data["timestamp"].isna() | data["item_id"].isna()
                                       | ~data["pool"].isin(["crowd", "trusted"]))
    summary = Monitor(config(tmp_path, "invalid", 50, table=source["name"])).run_pass(send_alerts=False)
    per_chunk = [d["n_invalid"] for d in summary["deliveries"]]
    assert sum(n > 0 for n in per_chunk) >= 3  # invalid rows in more than one transaction (not only the last)
    assert summary["n_invalid"] == sum(per_chunk) == int(invalid.sum())
    for key in passes.COUNTS:  # the pass totals are the sums of its deliveries', whatever the chunking
        assert summary[key] == sum(d[key] for d in summary["deliveries"]), key
    assert summary["questions"]["label"]["n_new"] == summary["n_new"] > 0


def test_a_count_only_an_earlier_chunk_carries_is_summed():
    def step(pass_id: str, question: dict[str, Any], windows: int, delivery: dict[str, Any]) -> dict[str, Any]:
        return {"pass_id": pass_id, "started_at": pass_id, "replay": False, "rows": 2, "n_new": delivery["n_new"],
                "deliveries": [delivery], "timing": {"merge": 0.5},
                "questions": {"q": {**question, "windows": windows, "events": [], "cumulative": {}}}}

    counts = dict.fromkeys(passes.COUNTS, 0)
    first = step("a", {"n_new": 1, "n_replaced": 2, "n_removed": 1}, 0, {**counts, "n_new": 1, "n_invalid": 1})
    last = step("b", {"n_new": 3}, 4, {**counts, "n_new": 3, "n_invalid": 2})  # merged no restatement
    out = passes.combined([first, last])
    assert out["questions"]["q"] == {"n_new": 4, "n_replaced": 2, "n_removed": 1, "windows": 4, "events": [],
                                     "cumulative": {}}
    assert (out["n_new"], out["n_invalid"], out["rows"], out["steps"]) == (4, 3, 4, ["a", "b"])
    assert out["started_at"] == "a" and out["timing"] == {"merge": 1.0}
