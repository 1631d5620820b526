"""Label sets, spans and boxes on the routes other than a file: a SQL query's rows are measured as a file's (the same
decision, values and per-label agreement); a source that would compute the statistics in the database
(``aggregate: true``) is refused up front, naming the question and the supported route, on the command line as in
the configuration (``tests/pipeline/test_config.py``) — never a silent number or a traceback.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from labelgate.cli.main import app
from labelgate.gate import run
from tests.gate import drawn

sa = pytest.importorskip("sqlalchemy")

ENV = "LG_TEST_DRAWN_DB"
QUESTIONS = {
    "sets": [{"name": "topics", "level": "set", "distance": "masi", "sep": "|"}],
    "spans": [{"name": "ner", "kind": "spans", "categories": ["PER", "LOC", "ORG"]}],
    "boxes": [{"name": "objects", "kind": "boxes", "boxes": {"iou": 0.5}}],
}
BUILD = {"sets": drawn.sets, "spans": drawn.spans, "boxes": drawn.boxes}


def config(tmp_path: Path, kind: str, **batch: Any) -> dict[str, Any]:
    return {"questions": QUESTIONS[kind],
            "gates": [{"type": "normalized_cross_kappa", "min_value": 0.75}, {"type": "cross_kappa", "min_value": 0.6},
                      {"type": "irr_baseline", "tolerance": 0.1}, {"type": "spa", "min_value": 0.5}],
            "interval": {"n_boot": 60, "seed": 0},
            "store": {"url": f"sqlite:///{(tmp_path / 'r.db').as_posix()}"},
            "reports": {"dir": (tmp_path / "reports").as_posix()}, **({"batch": batch} if batch else {})}


def table(kind: str, seed: int) -> pd.DataFrame:
    """Both pools in one table, as a file or a database holds them (a set as text joined by its separator; the
    empty set, "none applies", is the separator alone)."""
    frame = BUILD[kind](seed=seed)
    if kind == "sets":
        frame = frame.assign(label=frame["label"].map(lambda tags: "|".join(tags) or "|"))
    return frame


@pytest.mark.parametrize("kind", ["sets", "spans", "boxes"])
def test_the_rows_of_a_sql_query_are_measured_as_the_same_rows_in_a_file(tmp_path: Path, kind: str, sql_url: str,
                                                                         monkeypatch):
    frame = table(kind, seed=11)
    frame.to_csv(tmp_path / "both.csv", index=False)
    name = f"drawn_{kind}_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(sql_url)
    frame.to_sql(name, engine, index=False)
    monkeypatch.setenv(ENV, sql_url)
    try:
        from_file = run(config(tmp_path / "file", kind), tmp_path / "both.csv")
        from_sql = run(config(tmp_path / "sql", kind, format="sql", query=f'SELECT * FROM "{name}"', url_env=ENV))
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP TABLE IF EXISTS "{name}"'))
        engine.dispose()
    assert from_file["decision"] == "ACCEPT", from_file["reasons"]
    assert from_sql["decision"] == from_file["decision"], from_sql["reasons"]
    assert from_sql["reasons"] == from_file["reasons"]
    question = QUESTIONS[kind][0]["name"]
    for name, row in from_file["metrics"][question].items():
        for key in ("value", "ci_low", "ci_high"):
            expected, got = row.get(key), from_sql["metrics"][question][name].get(key)
            assert (got is None) == (expected is None) and (expected is None or got == pytest.approx(
                expected, rel=1e-12, abs=1e-12)), (name, key, expected, got)
    if kind != "sets":  # spans and boxes: the same units, the same agreement on each label
        # (to the last bits: a CSV's float text may parse one ulp off the database's double at pandas 2.2)
        assert_close(from_sql["units"], from_file["units"], "units")


def assert_close(got: Any, expected: Any, where: str) -> None:
    """Equal, numbers to 1e-12 relative, recursively through dicts and lists."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) == set(expected), (where, got, expected)
        for key in expected:
            assert_close(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), (where, got, expected)
        for k, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert_close(a, b, f"{where}[{k}]")
    elif isinstance(expected, float):
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12), (where, got, expected)
    else:
        assert got == expected, (where, got, expected)


@pytest.mark.parametrize("kind", ["sets", "spans", "boxes"])
def test_the_gate_command_refuses_a_database_aggregate_of_them_in_one_line(tmp_path: Path, kind: str):
    path = tmp_path / "gate.yaml"
    path.write_text(json.dumps(config(tmp_path, kind, format="sql", query="SELECT * FROM judgements", url_env=ENV,
                                      aggregate=True)), encoding="utf-8")
    result = CliRunner().invoke(app, ["gate", "--config", str(path), "--prefect", "never", "--json"])
    assert result.exit_code == 3, result.output
    assert json.loads(result.stdout)["decision"] == "ERROR"
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    question = QUESTIONS[kind][0]
    what = "level: set" if kind == "sets" else f"kind: {kind}"
    assert f"'{question['name']}' ({what})" in errors[0]
    assert "set 'aggregate: false' there" in errors[0]
    assert "Traceback" not in result.output
