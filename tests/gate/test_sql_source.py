"""The gate on a SQL source with ``aggregate: true``: validated and measured in the database.

The decision, values, intervals and rater diagnostics equal the row path's on the same rows (a CSV sorted by item
id: the SQL path orders items by id, the row path by first appearance), bad rows are counted and quarantined with
their reasons, duplicates are quarantined, the digest keys reuse, and every fault is an ERROR. On SQLite and, with
``LABELGATE_TEST_POSTGRES_URL``, on PostgreSQL.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

sa = pytest.importorskip("sqlalchemy")

from labelgate.gate import run  # noqa: E402
from labelgate.pipeline.config import GateConfig  # noqa: E402
from labelgate.pipeline.sources.sql_batch import load_sql_batch, refusal  # noqa: E402

ENV = "LG_TEST_AGG_DB"


def judgements(seed: int = 5, n_items: int = 50) -> pd.DataFrame:
    """Crowd of 4-6 raters and trusted pool of 2-3 per item, three categories, sorted by item id."""
    rng = np.random.default_rng(seed)
    rows = []
    for item in rng.permutation(n_items):
        truth = int(rng.integers(3))
        for pool, k, p in (("crowd", int(rng.integers(4, 7)), 0.7), ("trusted", int(rng.integers(2, 4)), 0.9)):
            for rater in rng.choice(14, k, replace=False):
                label = truth if rng.random() < p else int(rng.integers(3))
                rows.append((f"doc-{item:03d}", f"{pool[0]}{rater}", ["neg", "neu", "pos"][label], pool))
    frame = pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])
    return frame.sort_values("item_id", kind="stable").reset_index(drop=True)


def base_config(tmp_path: Path) -> dict[str, Any]:
    return {"store": {"url": f"sqlite:///{tmp_path / 'store.db'}"}, "reports": {"dir": str(tmp_path / "reports")},
            "gates": [{"type": "normalized_cross_kappa", "min_value": 0.5}, {"type": "irr_baseline", "tolerance": 0.5},
                      {"type": "spa", "min_value": 0.4}],
            "interval": {"ci": 0.9, "n_boot": 120, "seed": 11}}


def sql_config(tmp_path: Path, query: str = "SELECT * FROM {table}", **extra: Any) -> dict[str, Any]:
    return {**base_config(tmp_path), "batch": {"format": "sql", "query": query, "url_env": ENV, "aggregate": True,
                                                 **extra}}


@pytest.fixture
def database(sql_url, monkeypatch):
    """``put(frame) -> table name`` on a fresh database (SQLite, then PostgreSQL) named by :data:`ENV`."""
    url = sql_url
    engine = sa.create_engine(url)
    made: list[str] = []

    def put(frame: pd.DataFrame, name: str | None = None) -> str:
        name = name or f"judgements_{uuid.uuid4().hex[:10]}"
        frame.to_sql(name, engine, index=False, if_exists="replace")
        made.append(name)
        return name

    monkeypatch.setenv(ENV, url)
    yield put
    with engine.begin() as conn:
        for name in made:
            conn.execute(sa.text(f'DROP TABLE IF EXISTS "{name}"'))
    engine.dispose()


def gate_both(tmp_path: Path, put, frame: pd.DataFrame, config: dict[str, Any] | None = None,
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The decision on the rows as a CSV file and as a SQL table in the database."""
    csv = tmp_path / "batch.csv"
    frame.to_csv(csv, index=False)
    table = put(frame)
    extra = config or {}
    on_rows = run({**base_config(tmp_path), **extra}, csv, batch_id="rows")
    cfg = sql_config(tmp_path)
    cfg["batch"]["query"] = cfg["batch"]["query"].format(table=table)
    on_sql = run({**cfg, **extra}, batch_id="sql")
    return on_rows, on_sql


def by_rater(diagnostics: dict[str, Any]) -> dict[str, Any]:
    """The diagnostics with each question's rater rows keyed by rater (the row path lists them by first appearance,
    the SQL path by id)."""
    return {q: {**d, "raters": {r["rater_id"]: r for r in d["raters"]}} for q, d in diagnostics.items()}


def same(a: Any, b: Any, where: str = "", tol: float = 1e-12) -> None:
    """Equal JSON-like values; floats to ``tol``."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            same(a[k], b[k], f"{where}.{k}", tol)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{k}]", tol)
    elif isinstance(a, float) and isinstance(b, (int, float)):
        assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=tol, abs_tol=tol), \
            f"{where}: {a} != {b}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def test_decision_values_intervals_and_diagnostics_equal_the_row_path(tmp_path, database):
    on_rows, on_sql = gate_both(tmp_path, database, judgements())
    assert on_rows["decision"] == on_sql["decision"] != "ERROR", (on_rows["reasons"], on_sql["reasons"])
    assert on_rows["reasons"] == on_sql["reasons"]
    same(on_rows["metrics"], on_sql["metrics"], "metrics")
    same(on_rows["coverage"], on_sql["coverage"], "coverage")
    same(by_rater(on_rows["diagnostics"]), by_rater(on_sql["diagnostics"]), "diagnostics")
    url = os.environ[ENV]
    written = [p for p in (tmp_path / "reports").rglob("*") if p.is_file() and url.encode() in p.read_bytes()]
    assert written == []  # the GX project names the environment variable, never the URL
    report = on_sql["validation"]["sql"]
    n = len(judgements())
    assert report["judgements"] == n
    # the coded judgements (one row each, for the rater diagnostics and the digest) and small aggregates
    assert n <= report["rows_fetched"] < n + 300


def test_two_questions_in_a_question_column(tmp_path, database):
    one, two = judgements(seed=1), judgements(seed=2)
    frame = pd.concat([one.assign(q="sentiment"), two.assign(q="topic")]).sort_values("item_id", kind="stable")
    config = {"columns": {"question": "q"}, "questions": [{"name": "sentiment"}, {"name": "topic"}]}
    on_rows, on_sql = gate_both(tmp_path, database, frame.reset_index(drop=True), config)
    assert on_rows["decision"] == on_sql["decision"] != "ERROR", (on_rows["reasons"], on_sql["reasons"])
    same(on_rows["metrics"], on_sql["metrics"], "metrics")
    same(by_rater(on_rows["diagnostics"]), by_rater(on_sql["diagnostics"]), "diagnostics")


def test_bad_rows_are_counted_named_and_quarantined_like_the_row_path(tmp_path, database):
    frame = judgements().astype(object)
    frame.loc[3, "item_id"] = None             # missing id
    frame.loc[7, "label"] = "spam"             # outside the trusted pool's categories
    frame.loc[11, "pool"] = "vendor-x"         # unknown pool (goes to the crowd table)
    duplicate = frame.loc[[22]]                # a crowd rater twice on an item
    frame = pd.concat([frame, duplicate]).sort_values("item_id", kind="stable", na_position="first")
    config = {"validation": {"on_invalid": "continue", "max_invalid_share": 0.5}, "pools": {"unknown": "invalid"}}
    on_rows, on_sql = gate_both(tmp_path, database, frame.reset_index(drop=True), config)
    assert on_sql["decision"] != "ERROR", on_sql["reasons"]
    for table in ("crowd", "trusted"):
        rows, sql = on_rows["validation"][table], on_sql["validation"][table]
        for key in ("n_rows", "n_valid", "n_invalid", "error_counts", "passed_policy", "reason"):
            assert rows[key] == sql[key], (table, key, rows[key], sql[key])
    same(on_rows["metrics"], on_sql["metrics"], "metrics")
    quarantined = pd.read_csv(on_sql["reports"]["quarantine_crowd"])
    reasons = " | ".join(quarantined["_reasons"])
    assert "item_id: not_null: missing value" in reasons
    assert "'spam' is not one of the categories ['neg', 'neu', 'pos']" in reasons
    assert "'vendor-x' is not the expected pool 'crowd'" in reasons
    assert "occurs 2 times; every copy is quarantined" in reasons
    assert len(quarantined) == on_sql["validation"]["crowd"]["n_invalid"]


def test_a_batch_over_the_invalid_share_is_rejected(tmp_path, database):
    frame = judgements().astype(object)
    frame.loc[frame.index[frame["pool"] == "crowd"][:40], "label"] = "spam"
    _, on_sql = gate_both(tmp_path, database, frame)
    assert on_sql["decision"] == "REJECT"
    assert any("failed validation" in r for r in on_sql["reasons"]), on_sql["reasons"]


def test_the_digest_keys_reuse_and_follows_the_content(tmp_path, database):
    frame = judgements()
    table = database(frame)
    first = run(_with_table(sql_config(tmp_path), table), batch_id="a")
    database(frame.sample(frac=1.0, random_state=3), table)  # the same rows in another order
    again = run(_with_table(sql_config(tmp_path), table), batch_id="b")
    assert again["inputs_digest"] == first["inputs_digest"] and again["reused"]
    changed = frame.copy()
    changed.loc[0, "label"] = "pos" if changed.loc[0, "label"] != "pos" else "neg"
    database(changed, table)
    moved = run(_with_table(sql_config(tmp_path), table), batch_id="c")
    assert moved["inputs_digest"] != first["inputs_digest"] and not moved["reused"]


def _with_table(config: dict[str, Any], table: str) -> dict[str, Any]:
    config["batch"]["query"] = config["batch"]["query"].format(table=table)
    return config


def test_query_parameters_are_bound(tmp_path, database):
    frame = pd.concat([judgements().assign(week=1), judgements(seed=9).assign(week=2)])
    table = database(frame)
    cfg = sql_config(tmp_path, query=f"SELECT * FROM {table} WHERE week = :week", params={"week": 2})
    on_sql = run(cfg, batch_id="week2")
    assert on_sql["decision"] != "ERROR", on_sql["reasons"]
    assert on_sql["validation"]["sql"]["judgements"] == len(judgements(seed=9))


@pytest.mark.parametrize("tail", ["; -- note", ";\n/* v2 */ ;  -- note\n"])
def test_a_query_ending_on_a_comment_after_a_semicolon_is_read(tmp_path, database, tail):
    # the batch query is cleaned by the rule of the monitor's SQL source (sources.sql.bare_query); a string holding
    # "--" and ";" on a line of its own is code, not a comment
    frame = pd.concat([judgements().assign(week=1), judgements(seed=9).assign(week=2)])
    table = database(frame)
    query = f"SELECT * FROM {table} WHERE week = :week AND label <> 'x;\n-- y' {tail}"
    on_sql = run(sql_config(tmp_path, query=query, params={"week": 2}), batch_id="commented")
    assert on_sql["decision"] != "ERROR", on_sql["reasons"]
    assert on_sql["validation"]["sql"]["judgements"] == len(judgements(seed=9))


def test_an_unreachable_database_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "postgresql+psycopg://nobody@127.0.0.1:9/none?connect_timeout=2")
    summary = run(sql_config(tmp_path, query="SELECT * FROM judgements"), batch_id="down")
    assert summary["decision"] == "ERROR" and summary["error_step"] == "load"
    assert "Cannot connect to the database named by 'LG_TEST_AGG_DB'" in summary["reasons"][0]
    assert "nobody" not in " ".join(summary["reasons"])  # the URL never enters a message


def test_a_failing_query_and_a_missing_column_are_errors(tmp_path, database):
    table = database(judgements().drop(columns=["rater_id"]))
    missing = run(_with_table(sql_config(tmp_path), table), batch_id="nocol")
    assert missing["decision"] == "ERROR"
    assert "Column 'rater_id' (the rater column) is missing" in missing["reasons"][0]
    broken = run(sql_config(tmp_path, query="SELECT * FROM no_such_table"), batch_id="broken")
    assert broken["decision"] == "ERROR" and "The batch query failed" in broken["reasons"][0]


def test_what_needs_the_rows_is_refused_with_the_reason(tmp_path):
    base = sql_config(tmp_path, query="SELECT * FROM t")
    assert refusal(GateConfig.model_validate(base)) is None
    icc = GateConfig.model_validate({**base, "gates": [{"type": "labeler_icc"}]})
    assert "labeler_icc" in (refusal(icc) or "")
    conger = GateConfig.model_validate({**base, "gates": [{"type": "irr_baseline", "tolerance": 0.1,
                                                          "irr": "conger_kappa"}]})
    assert "conger_kappa" in (refusal(conger) or "")
    exclude = GateConfig.model_validate({**base, "raters": {"low_agreement": "exclude"}})
    assert "exclude" in (refusal(exclude) or "")
    where = GateConfig.model_validate({**base, "batch": {**base["batch"], "where": {"pool": "crowd"}}})
    assert "WHERE" in (refusal(where) or "")
    assert "WHERE" in (refusal(GateConfig.model_validate({**base, "trusted": {"where": {"pool": "t"}}})) or "")
    summary = run({**base, "gates": [{"type": "labeler_icc"}]}, batch_id="icc")
    assert summary["decision"] == "ERROR" and "labeler_icc" in summary["reasons"][0]
    with pytest.raises(ValueError, match="needs format 'sql'"):
        GateConfig.model_validate({"batch": {"path": "x.csv", "aggregate": True}})


def test_no_row_of_a_pool_is_an_error(tmp_path, database):
    table = database(judgements().query("pool == 'crowd'"))
    cfg = GateConfig.model_validate(_with_table(sql_config(tmp_path), table))
    with pytest.raises(Exception, match="no row with the value 'trusted'"):
        load_sql_batch(cfg)


@pytest.mark.usefixtures("prefect_api")
def test_the_prefect_gate_flow_runs_the_database_path(tmp_path, database):
    from labelgate.flows.gate import run_gate_flow

    frame = judgements()
    csv = tmp_path / "batch.csv"
    frame.to_csv(csv, index=False)
    on_rows = run({**base_config(tmp_path)}, csv, batch_id="rows")
    on_flow = run_gate_flow(_with_table(sql_config(tmp_path), database(frame)), batch_id="flow")
    assert on_flow["decision"] == on_rows["decision"] != "ERROR", on_flow["reasons"]
    same(on_rows["metrics"], on_flow["metrics"], "metrics")
    assert on_flow["validation"]["sql"]["judgements"] == len(frame)


def test_a_named_source_requested_by_an_event_runs_in_the_database(tmp_path, database):
    frame = pd.concat([judgements().assign(week=1), judgements(seed=9).assign(week=2)])
    table = database(frame)
    cfg = {**base_config(tmp_path), "sources": {"labels_db": {
        "format": "sql", "url_env": ENV, "aggregate": True, "query": f"SELECT * FROM {table} WHERE week = :week"}}}
    summary = run(cfg, source={"name": "labels_db", "params": {"week": 1}}, batch_id="w1")
    assert summary["decision"] != "ERROR", summary["reasons"]
    assert summary["validation"]["sql"]["judgements"] == len(judgements())


@pytest.mark.parametrize("level", ["interval", "nominal"])
def test_integer_ids_and_numeric_labels_equal_the_row_path(tmp_path, database, level):
    """Integer item ids become text ids in both paths; interval labels are numbers, and nominal labels stored as
    numeric text ("1") are keyed to the numeric categories the trusted labels give (1), as the row path does."""
    frame = judgements(seed=13)
    codes = {"neg": 1, "neu": 2, "pos": 3}
    frame["item_id"] = frame["item_id"].str[4:].astype(int)
    frame["label"] = frame["label"].map(codes if level == "interval" else {k: str(v) for k, v in codes.items()})
    # the disattenuated correlation (numeric labels) splits each item's judgements in halves by their order: the
    # database path orders them by rater id, so the file is sorted by item and rater id
    frame = frame.sort_values(["item_id", "rater_id"], key=lambda s: s.astype(str)).reset_index(drop=True)
    on_rows, on_sql = gate_both(tmp_path, database, frame, {"questions": [{"name": "label", "level": level}]})
    assert on_rows["decision"] == on_sql["decision"] != "ERROR", (on_rows["reasons"], on_sql["reasons"])
    # interval statistics are sums of counts x values on the database path, of single values on the row path: the
    # rounding differs in the last digits (1e-11 seen in a bootstrap bound)
    tol = 1e-9 if level == "interval" else 1e-12
    same(on_rows["metrics"], on_sql["metrics"], "metrics", tol)
    same(by_rater(on_rows["diagnostics"]), by_rater(on_sql["diagnostics"]), "diagnostics", tol)
    sql = on_sql["validation"]["sql"]
    assert sql["rater_diagnostics"] == "database"
    # only the disattenuated correlation (numeric labels) fetches the judgements; nominal ones stay in the database
    assert ("judgements_fetched" in sql) == (level == "interval")


def test_rater_diagnostics_with_colluders_come_from_the_database(tmp_path, database):
    """Two raters copying each other and a guesser: the flags, partners and every number equal the row path's, and
    no judgement is fetched (the rater rows come from the per-rater sums the database aggregated; on 120 items the context rows do not yet
    compress: tests/sqlagg/test_rater_sums.py checks that they do on a larger table)."""
    frame = judgements(seed=21, n_items=120)
    rng = np.random.default_rng(4)
    for rows in frame[frame["pool"] == "crowd"].groupby("item_id").groups.values():
        copied = ["neg", "neu", "pos"][int(rng.integers(3))]
        frame.loc[rows[:2], ["rater_id", "label"]] = [["c20", copied], ["c21", copied]]
        frame.loc[rows[2], "label"] = ["neg", "neu", "pos"][int(rng.integers(3))]
    extra = {"raters": {"min_shared_items": 5, "collusion": "review"}}
    on_rows, on_sql = gate_both(tmp_path, database, frame, extra)
    assert on_rows["decision"] == on_sql["decision"] != "ERROR", (on_rows["reasons"], on_sql["reasons"])
    rows, sql_rows = by_rater(on_rows["diagnostics"]), by_rater(on_sql["diagnostics"])
    same(rows, sql_rows, "diagnostics")
    assert sorted(sql_rows["label"]["raters"]["c20"]["partners"]) == ["c21"]
    sql = on_sql["validation"]["sql"]
    assert "judgements_fetched" not in sql and sql["rater_diagnostics"] == "database", sql


def test_a_trusted_file_with_a_database_batch_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, f"sqlite:///{tmp_path / 'none.db'}")
    trusted = tmp_path / "trusted.csv"
    judgements().to_csv(trusted, index=False)
    summary = run(sql_config(tmp_path, query="SELECT * FROM t"), None, trusted, batch_id="mixed")
    assert summary["decision"] == "ERROR" and "A trusted file was given" in summary["reasons"][0]


def test_session_settings_hold_for_the_validating_transaction_only(tmp_path, database):
    """``session: {work_mem: ...}`` is set with set_config(..., is_local) on PostgreSQL: the gate decides as without
    it, and the setting ends with the transaction; on another database, and for a name outside the list, it is an
    error."""
    from labelgate.pipeline.sources.sql_judgements import apply_session

    frame = judgements()
    table = database(frame)
    url = os.environ[ENV]
    cfg = _with_table(sql_config(tmp_path, session={"work_mem": "64MB"}), table)
    summary = run(cfg, batch_id="session")
    if url.startswith("sqlite"):
        assert summary["decision"] == "ERROR" and "settings are PostgreSQL's" in summary["reasons"][0]
    else:
        plain = run(_with_table(sql_config(tmp_path), table), batch_id="plain")
        assert summary["decision"] == plain["decision"] != "ERROR", summary["reasons"]
        same(plain["metrics"], summary["metrics"], "metrics")
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            before = conn.execute(sa.text("SHOW work_mem")).scalar()
            apply_session(conn, {"work_mem": "77MB"})
            assert conn.execute(sa.text("SHOW work_mem")).scalar() == "77MB"
            conn.rollback()
            assert conn.execute(sa.text("SHOW work_mem")).scalar() == before
        engine.dispose()
    for bad in ({"shared_buffers": "1GB"}, {"work_mem": "9" * 70}):
        with pytest.raises(ValueError, match="'session' sets one of"):
            GateConfig.model_validate(sql_config(tmp_path, session=bad))
    with pytest.raises(ValueError, match="needs 'aggregate: true'"):
        GateConfig.model_validate({"batch": {"format": "sql", "query": "SELECT 1", "url_env": ENV,
                                             "session": {"work_mem": "64MB"}}})


def test_judgements_fetched_later_must_match_the_aggregates(tmp_path, database):
    """The disattenuated correlation's judgements are fetched on a new connection in the diagnose step: a write in
    between (the digest would not cover it) is an error, never a silent mix."""
    frame = judgements(seed=13)
    frame["label"] = frame["label"].map({"neg": 1, "neu": 2, "pos": 3})
    table = database(frame)
    cfg = GateConfig.model_validate(_with_table(sql_config(tmp_path) | {
        "questions": [{"name": "label", "level": "interval"}]}, table))
    batch = load_sql_batch(cfg)
    question = cfg.questions[0]
    crowd, trusted = batch.judgements(cfg, question)
    assert crowd is not None and trusted is not None and batch.report["judgements_fetched"] == len(frame)
    engine = sa.create_engine(os.environ[ENV])
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {table} SET label = 3 WHERE label = 1"))
    engine.dispose()
    with pytest.raises(Exception, match="changed while the batch was gated"):
        batch.judgements(cfg, question)


def test_the_digest_covers_the_rows_of_questions_not_gated(tmp_path, database):
    """Coverage counts every valid row: crowd items of a question the gate does not judge change it, so they change
    the digest too, and a REVIEW is never answered with the ACCEPT of other rows."""
    frame = pd.concat([judgements(seed=1).assign(q="sentiment"), judgements(seed=2).assign(q="topic")],
                      ignore_index=True)
    config = {**sql_config(tmp_path), "columns": {"question": "q"}, "questions": [{"name": "sentiment"}],
              "coverage": {"min_coverage": 0.8}, "gates": [{"type": "spa", "min_value": 0.2}]}
    table = database(frame)
    first = run(_with_table(json.loads(json.dumps(config)), table), batch_id="a")
    moved = frame.copy()
    topic_crowd = (moved["q"] == "topic") & (moved["pool"] == "crowd")
    moved.loc[topic_crowd, "item_id"] = "x-" + moved.loc[topic_crowd, "item_id"].astype(str)
    database(moved, table)
    second = run(_with_table(json.loads(json.dumps(config)), table), batch_id="b")
    assert first["decision"] == "ACCEPT" and second["decision"] == "REVIEW", (first["reasons"], second["reasons"])
    assert second["inputs_digest"] != first["inputs_digest"] and not second["reused"]


def test_a_write_between_the_load_and_the_measurement_is_an_error(tmp_path, database, monkeypatch):
    """The GX data source reads the table on its own connection: when the counts it measured are not the ones the
    load validated and digested, the run is an ERROR, never a decision filed under the other rows' digest."""
    from labelgate.pipeline.sources import sql_batch

    frame = judgements(seed=4)
    table = database(frame)
    gx_batches = sql_batch.SqlBatch.gx_batches

    def written_first(self, context):
        engine = sa.create_engine(os.environ[ENV])
        with engine.begin() as conn:
            conn.execute(sa.text(f"UPDATE {table} SET label = 'pos' WHERE label = 'neg'"))
        engine.dispose()
        return gx_batches(self, context)

    monkeypatch.setattr(sql_batch.SqlBatch, "gx_batches", written_first)
    summary = run(_with_table(sql_config(tmp_path), table), batch_id="raced")
    assert summary["decision"] == "ERROR" and summary["error_step"] == "measure", summary["reasons"]
    assert "changed while the batch was gated" in summary["reasons"][0]


@pytest.mark.usefixtures("prefect_api")
def test_the_cli_gates_a_sql_source_without_batch(tmp_path, database):
    """``labelgate gate --config sql.yaml``: the query selects the batch, its id is derived from the database, the
    query and its parameters (``sql-<digest>``), and the decision is recorded under it."""
    from typer.testing import CliRunner

    from labelgate.cli.label_studio import sql_batch_id
    from labelgate.cli.main import app
    from labelgate.pipeline.config import load_config

    table = database(judgements(seed=6))
    (tmp_path / "sql.yaml").write_text(json.dumps(_with_table(sql_config(tmp_path), table)), encoding="utf-8")
    result = CliRunner().invoke(app, ["gate", "--config", str(tmp_path / "sql.yaml"), "--json"])
    payload = json.loads(result.stdout)
    expected = sql_batch_id(load_config(tmp_path / "sql.yaml").batch)
    assert payload["batch_id"] == expected and expected.startswith("sql-")
    assert result.exit_code == {"ACCEPT": 0, "REJECT": 1, "REVIEW": 2}[payload["decision"]], payload["reasons"]
