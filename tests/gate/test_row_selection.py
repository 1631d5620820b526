"""Row selection (``batch.where`` / ``trusted.where``): one export holding several vendors' pools is gated per pool;
the rows outside the selection are counted and reported, not quarantined (issue 18, defect 8)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from labelgate.cli.main import gate_json, gate_text
from labelgate.errors import InputError
from labelgate.gate import run
from labelgate.pipeline.config import ConfigError, GateConfig, config_from_dict
from labelgate.pipeline.sources.pools import load_selected, select_rows
from labelgate.pipeline.synth import scenario_named, simulate

CONFIG = """
gates:
  - {{type: normalized_cross_kappa, min_value: 0.8}}
interval: {{n_boot: 200, seed: 0, diagnose_n_boot: 100}}
coverage: {{min_common_items: 10}}
{selection}
store: {{url: "sqlite:///{store}"}}
reports: {{dir: "{reports}"}}
"""
VENDORS = ("vendor_a", "vendor_b", "vendor_c")


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    """One file: the trusted replication and three vendors' pools of the same items; vendor_b labels at random."""
    data = simulate(scenario_named("good", 600), seed=1)
    trusted, crowd = data[data["pool"] == "trusted"], data[data["pool"] == "crowd"]
    rng = np.random.default_rng(5)
    parts = [trusted]
    for vendor in VENDORS:
        part = crowd.assign(pool=vendor, rater_id=crowd["rater_id"].str.replace("crowd", vendor))
        if vendor == "vendor_b":
            part = part.assign(label=rng.choice(sorted(crowd["label"].unique()), size=len(part)))
        parts.append(part)
    path = tmp_path_factory.mktemp("export") / "export.csv"
    pd.concat(parts, ignore_index=True).to_csv(path, index=False)
    return path


def gate(folder: Path, export: Path, selection: str):
    config = folder / "gate.yaml"
    config.write_text(CONFIG.format(selection=selection, store=(folder / "r.db").as_posix(),
                                    reports=(folder / "reports").as_posix()), encoding="utf-8")
    return run(config, export)


@pytest.mark.parametrize(("vendor", "decision"), [("vendor_a", "ACCEPT"), ("vendor_b", "REJECT"),
                                                  ("vendor_c", "ACCEPT")])
def test_one_export_with_three_pools_is_gated_per_pool(tmp_path, export, vendor, decision):
    summary = gate(tmp_path, export, f"pools: {{crowd: {vendor}}}\nbatch: {{where: {{pool: {vendor}}}}}")
    assert summary["decision"] == decision, summary["reasons"]
    table = pd.read_csv(export)
    validation = summary["validation"][vendor]
    # the other vendors' rows are counted, not quarantined
    assert validation["n_invalid"] == 0 and validation["n_rows"] == int((table["pool"] == vendor).sum())
    outside = int(table["pool"].isin(set(VENDORS) - {vendor}).sum())
    assert validation["selection"] == {"role": "batch", "where": {"pool": vendor},
                                       "n_rows": outside + validation["n_rows"],
                                       "n_selected": validation["n_rows"], "n_outside": outside}
    assert gate_json(summary)["selection"]["batch"]["n_outside"] == outside
    assert f"selection: {outside} of {outside + validation['n_rows']} batch rows are outside batch.where" in \
        gate_text(summary)


def test_without_a_selection_the_other_pools_are_left_out_and_counted(tmp_path, export):
    table = pd.read_csv(export)
    summary = gate(tmp_path, export, "pools: {crowd: vendor_a}")
    assert summary["decision"] == "ACCEPT", summary["reasons"]
    validation = summary["validation"]["vendor_a"]
    assert validation["n_invalid"] == 0 and validation["n_rows"] == int((table["pool"] == "vendor_a").sum())
    assert validation["left_out"] == {f"pool {v!r} not configured": int((table["pool"] == v).sum())
                                      for v in ("vendor_b", "vendor_c")}
    assert "selection" not in validation


def test_without_a_selection_other_pools_are_invalid_rows_when_the_config_says_so(tmp_path, export):
    summary = gate(tmp_path, export, "pools: {crowd: vendor_a, unknown: invalid}")
    assert summary["decision"] == "REJECT"
    table = pd.read_csv(export)
    validation = summary["validation"]["vendor_a"]
    assert validation["error_counts"] == {"pool:pool": int(table["pool"].isin(["vendor_b", "vendor_c"]).sum())}
    assert validation["left_out"] == {}


def test_a_selection_naming_a_missing_column_is_an_error_naming_it(tmp_path, export):
    summary = gate(tmp_path, export, "pools: {crowd: vendor_a}\nbatch: {where: {vendor: a}}")
    assert summary["decision"] == "ERROR" and summary["error_step"] == "load"
    assert "'vendor'" in summary["reasons"][0] and "batch.where" in summary["reasons"][0]


def test_the_trusted_selection_and_lists_of_values(tmp_path):
    both = tmp_path / "both.csv"
    both.write_text("item_id,rater_id,label,pool,round\n"
                    "1,a,x,crowd,1\n1,b,y,crowd,2\n1,c,x,crowd,3\n1,t,x,trusted,1\n1,u,x,trusted,2\n")
    cfg = GateConfig.model_validate({"batch": {"where": {"round": [1, 2]}}, "trusted": {"where": {"round": 2}}})
    crowd, trusted, selection = load_selected(cfg, both)
    assert crowd["rater_id"].tolist() == ["a", "b"] and trusted["rater_id"].tolist() == ["u"]
    assert crowd.index.tolist() == [0, 1] and trusted.index.tolist() == [4]  # rows keep their row in the file
    assert selection == {"batch": {"where": {"round": [1, 2]}, "n_rows": 3, "n_selected": 2, "n_outside": 1},
                         "trusted": {"where": {"round": 2}, "n_rows": 2, "n_selected": 1, "n_outside": 1}}
    # a missing cell matches nothing
    frame = pd.DataFrame({"round": ["1", None]})
    assert select_rows(frame, {"round": 1}, "batch").index.tolist() == [0]
    with pytest.raises(InputError, match=r"Column 'week' of the row selection 'trusted\.where'"):
        select_rows(frame, {"week": 1}, "trusted")


def test_a_selection_is_validated_in_the_config():
    with pytest.raises(ConfigError, match="lists no value"):
        config_from_dict({"batch": {"where": {"pool": []}}})
    with pytest.raises(ConfigError, match=r"batch\.where"):
        config_from_dict({"batch": {"where": {"pool": True}}})
    assert config_from_dict({"batch": {"where": {"pool": "vendor_b"}}}).digest() != GateConfig().digest()


def test_a_batch_from_a_named_sql_source_with_parameters(tmp_path, monkeypatch):
    """The form a ``labelgate.batch.ready`` event carries: a configured source's name and its :name values."""
    from labelgate.gate import run
    from labelgate.pipeline.store import ResultsStore
    from tests.flows.test_events import SQL_SOURCES, judgements_database

    monkeypatch.setenv("LG_TEST_SOURCE_DB", judgements_database(tmp_path / "judgements.db"))
    config = {"gates": [{"type": "normalized_cross_kappa", "min_value": 0.8}], "interval": {"n_boot": 200, "seed": 0},
              "store": {"url": f"sqlite:///{(tmp_path / 'r.db').as_posix()}"},
              "reports": {"dir": (tmp_path / "rep").as_posix()}, "sources": SQL_SOURCES}
    good = run(config, source={"name": "vendor_db", "params": {"batch": "good"}}, batch_id="g")
    bad = run(config, source={"name": "vendor_db", "params": {"batch": "bad"}}, batch_id="b")
    assert good["decision"] == "ACCEPT" and bad["decision"] == "REJECT", (good["reasons"], bad["reasons"])
    unknown = run(config, source={"name": "nope", "params": {}}, batch_id="u")
    assert unknown["decision"] == "ERROR" and unknown["error_step"] == "source" and "'nope'" in unknown["reasons"][0]
    extra = run(config, source={"name": "vendor_db", "params": {"batch": "good", "x": "1"}}, batch_id="x")
    assert extra["decision"] == "ERROR" and "has no placeholder for ['x']" in extra["reasons"][0]
    missing = run(config, source={"name": "vendor_db", "params": {}}, batch_id="m")
    assert missing["decision"] == "ERROR" and "needs values for ['batch']" in missing["reasons"][0]
    assert ResultsStore(config["store"]["url"]).current("u").decision == "ERROR"  # refused requests are recorded


def test_query_parameters_must_name_placeholders_of_the_query():
    from labelgate.pipeline.config import ConfigError, config_from_dict

    source = {"format": "sql", "url_env": "X", "query": "SELECT * FROM t WHERE batch = :batch", "params": {"vendor": 1}}
    with pytest.raises(ConfigError, match=r"params \['vendor'\] name no ':name' placeholder of the query"):
        config_from_dict({"batch": source})
    with pytest.raises(ConfigError, match=r"sources.vendor_db: a named source is a SQL query"):
        config_from_dict({"sources": {"vendor_db": {"path": "x.csv"}}})
