"""The labeler ICC, Conger's κ and ι on the gate's in-database path: judged on the point value, refused on a bound.

The database computes them from each rater's sums (no judgement leaves it), but without an interval: their
resamples draw judgements. A gate judged on points decides as the row path does, with the same values; a gate
judged on interval bounds (``interval.use_ci_bound``) is an ERROR naming why, never a decision without its bound.
On SQLite and, with ``LABELGATE_TEST_POSTGRES_URL``, on PostgreSQL.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("sqlalchemy")

from labelgate.gate import run
from labelgate.pipeline.config import GateConfig
from labelgate.pipeline.sources.sql_batch import point_only_gates, refusal
from tests.gate.test_sql_source import (
    _with_table,
    database,  # noqa: F401 (a fixture)
    gate_both,
    judgements,
    sql_config,
)

POINT = {"ci": 0.9, "n_boot": 120, "seed": 11, "use_ci_bound": False}
BOUND = {**POINT, "use_ci_bound": True}


def numeric_judgements():
    """The nominal judgements coded 1-3 (interval labels), sorted by item and rater id as the database orders them."""
    frame = judgements(seed=13)
    frame["label"] = frame["label"].map({"neg": 1, "neu": 2, "pos": 3})
    return frame.sort_values(["item_id", "rater_id"], kind="stable").reset_index(drop=True)


# (name, frame builder, extra config): gates whose statistic needs each rater's sums, with one passing and one failing
CASES = {
    "labeler_icc_passes": (numeric_judgements, {"questions": [{"name": "label", "level": "interval"}],
                                                "gates": [{"type": "labeler_icc", "margin": 0.0}]}),
    "labeler_icc_fails": (numeric_judgements, {"questions": [{"name": "label", "level": "interval"}],
                                               "gates": [{"type": "labeler_icc", "margin": 0.99}]}),
    "conger_passes": (judgements, {"gates": [
        {"type": "irr_baseline", "tolerance": 0.5, "irr": "conger_kappa"},
        {"type": "normalized_cross_kappa", "min_value": 0.3, "irr": "conger_kappa"}]}),
    "conger_fails": (judgements, {"gates": [{"type": "irr_baseline", "min_ratio": 1.9, "irr": "conger_kappa"}]}),
}


def close(a: Any, b: Any) -> bool:
    return (a is None and b is None) or math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_point_only_gate_decides_as_the_row_path(tmp_path, database, case):  # noqa: F811
    make, extra = CASES[case]
    on_rows, on_sql = gate_both(tmp_path, database, make(), {**extra, "interval": POINT})
    assert on_sql["decision"] == on_rows["decision"] != "ERROR", (on_rows["reasons"], on_sql["reasons"])
    assert on_sql["decision"] == ("ACCEPT" if case.endswith("passes") else "REJECT"), on_sql["reasons"]
    rows, sql = on_rows["metrics"]["label"], on_sql["metrics"]["label"]
    gates = {g["type"] for g in extra["gates"]}
    for gate in gates:
        assert close(rows[gate]["value"], sql[gate]["value"]), (gate, rows[gate], sql[gate])
        assert rows[gate]["verdict"] == sql[gate]["verdict"]
    # the row path has an interval (reported, not judged); the database path has none
    first = sorted(gates)[0]
    assert rows[first]["ci_low"] is not None and sql[first]["ci_low"] is None


@pytest.mark.parametrize("case", ["labeler_icc_passes", "conger_passes"])
def test_a_gate_judged_on_the_bound_is_an_error_naming_why(tmp_path, database, case):  # noqa: F811
    make, extra = CASES[case]
    on_rows, on_sql = gate_both(tmp_path, database, make(), {**extra, "interval": BOUND})
    assert on_rows["decision"] != "ERROR", on_rows["reasons"]
    assert on_sql["decision"] == "ERROR", on_sql["reasons"]
    reason = on_sql["reasons"][0]
    assert "use_ci_bound" in reason and "no interval from the database's sums" in reason, reason
    assert ("labeler_icc" if case.startswith("labeler") else "conger_kappa") in reason


def test_only_bound_judged_rater_gates_are_refused(tmp_path):
    base = sql_config(tmp_path, query="SELECT * FROM t")
    for gates in ([{"type": "labeler_icc"}], [{"type": "irr_baseline", "tolerance": 0.1, "irr": "conger_kappa"}],
                  [{"type": "normalized_cross_kappa", "min_value": 0.1, "irr": "conger_kappa"}]):
        assert refusal(GateConfig.model_validate({**base, "gates": gates, "interval": POINT})) is None
        assert refusal(GateConfig.model_validate({**base, "gates": gates, "interval": {**BOUND, "ci": None}})) \
            is None  # no interval at all: every gate is judged on its point
        assert "use_ci_bound" in (refusal(GateConfig.model_validate({**base, "gates": gates, "interval": BOUND}))
                                  or "")
    # irr only matters where the gate computes an IRR
    spa = GateConfig.model_validate({**base, "gates": [{"type": "spa", "min_value": 0.1, "irr": "conger_kappa"}]})
    assert point_only_gates(spa) == [] and refusal(spa) is None
    fleiss = GateConfig.model_validate({**base, "gates": [{"type": "irr_baseline", "tolerance": 0.1,
                                                           "irr": "fleiss_kappa"}]})
    assert refusal(fleiss) is None


def test_the_refusal_is_recorded_before_any_query(tmp_path, monkeypatch):
    """An unreachable database is not even opened: the configuration is refused first, as an ERROR."""
    monkeypatch.setenv("LG_TEST_AGG_DB", f"sqlite:///{tmp_path / 'missing' / 'none.db'}")
    cfg = _with_table(sql_config(tmp_path), "t")
    summary = run({**cfg, "gates": [{"type": "labeler_icc"}], "interval": BOUND}, batch_id="refused")
    assert summary["decision"] == "ERROR" and "batch.aggregate" in summary["reasons"][0], summary["reasons"]
