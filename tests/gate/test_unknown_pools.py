"""A combined export with a third pool value (another vendor's rows): by default the rows are left out of the
measurement and counted by pool value in the validation summary, alike on the file path and in the database
(``aggregate: true``); with ``pools.unknown: invalid`` they fail validation's pool check as before."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sqlalchemy")

from labelgate.cli.main import gate_json, gate_text
from tests.gate import test_sql_source as sql
from tests.gate.test_sql_source import gate_both, judgements, same

database = sql.database  # the fixture: a fresh SQLite (and, when configured, PostgreSQL) database

#: Validation keys the file path and the database path must agree on.
KEYS = ("n_rows", "n_valid", "n_invalid", "error_counts", "passed_policy", "reason", "left_out")


def with_vendor(n_pilot: int = 0) -> tuple[pd.DataFrame, int]:
    """The judgements plus a third pool, ``vendor-b``, labelling the crowd's items at random with labels outside the
    categories (what would fail validation if its rows were checked), and ``n_pilot`` rows of a fourth pool."""
    frame = judgements()
    crowd = frame[frame["pool"] == "crowd"]
    rng = np.random.default_rng(3)
    vendor = crowd.assign(pool="vendor-b", rater_id="v" + crowd["rater_id"],
                          label=rng.choice(["neg", "pos", "junk"], size=len(crowd)))
    pilot = crowd.iloc[:n_pilot].assign(pool="pilot", rater_id="p" + crowd["rater_id"].iloc[:n_pilot])
    both = pd.concat([frame, vendor, pilot]).sort_values("item_id", kind="stable").reset_index(drop=True)
    return both, len(vendor)


def report_text(summary: dict) -> str:
    from labelgate.reporting.report import render_gate_report

    return render_gate_report(summary)


def test_a_third_pool_is_left_out_and_counted_alike_in_the_file_and_the_database(tmp_path, database):
    frame, n_vendor = with_vendor(n_pilot=4)
    on_rows, on_sql = gate_both(tmp_path, database, frame)
    (tmp_path / "two").mkdir()
    without, _ = gate_both(tmp_path / "two", database, judgements())
    expected = {"pool 'vendor-b' not configured": n_vendor, "pool 'pilot' not configured": 4}
    for summary in (on_rows, on_sql):
        # decided on the two configured pools: as if the other pools' rows were not there
        assert summary["decision"] == without["decision"] == "ACCEPT", summary["reasons"]
        crowd = summary["validation"]["crowd"]
        assert crowd["left_out"] == expected and crowd["n_invalid"] == 0
        assert crowd["n_rows"] == without["validation"]["crowd"]["n_rows"]
        assert list(crowd["left_out"]) == list(expected)  # most rows first
        assert crowd["reason"].endswith(f"; left out of the measurement: pool 'vendor-b' not configured {n_vendor} "
                                        "rows, pool 'pilot' not configured 4 rows.")
        assert summary["validation"]["trusted"]["left_out"] == {}
        assert gate_json(summary)["validation"]["crowd"]["left_out"] == expected
        assert (f"validation (crowd): rows left out of the measurement: pool 'vendor-b' not configured {n_vendor}, "
                "pool 'pilot' not configured 4") in gate_text(summary)
        assert f"pool &#39;vendor-b&#39; not configured {n_vendor} rows" in report_text(summary)
    for table in ("crowd", "trusted"):
        for key in KEYS:
            assert on_rows["validation"][table][key] == on_sql["validation"][table][key], (table, key)
    same(on_rows["metrics"], on_sql["metrics"], "metrics")
    same(on_rows["metrics"], without["metrics"], "metrics")


def test_a_third_pool_fails_validation_when_the_config_says_so(tmp_path, database):
    frame, n_vendor = with_vendor()
    on_rows, on_sql = gate_both(tmp_path, database, frame, {"pools": {"unknown": "invalid"}})
    for summary in (on_rows, on_sql):
        assert summary["decision"] == "REJECT"
        crowd = summary["validation"]["crowd"]
        assert crowd["error_counts"]["pool:pool"] == n_vendor and crowd["n_invalid"] == n_vendor
        assert crowd["left_out"] == {}
        assert any("failed validation" in r for r in summary["reasons"]), summary["reasons"]
    for key in KEYS:
        assert on_rows["validation"]["crowd"][key] == on_sql["validation"]["crowd"][key], key


def test_only_other_pools_and_no_crowd_is_an_error_naming_the_pools(tmp_path, database):
    frame, _ = with_vendor()
    frame = frame[frame["pool"] != "crowd"]
    on_rows, on_sql = gate_both(tmp_path, database, frame)
    for summary in (on_rows, on_sql):
        assert summary["decision"] == "ERROR"
        assert "has no row with the value 'crowd'" in summary["reasons"][0], summary["reasons"]
