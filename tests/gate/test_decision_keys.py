"""Decision keys and batch ids: a decision is served only for the very inputs it was computed from, and two batch
files are two batches unless their names say otherwise."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from labelgate.gate import run
from labelgate.pipeline.store import ResultsStore
from labelgate.pipeline.synth import scenario_named, simulate

CONFIG = """
gates:
  - type: normalized_cross_kappa
    min_value: 0.8
interval: {{n_boot: 100, seed: 0}}
store: {{url: "sqlite:///{store}"}}
reports: {{dir: "{reports}"}}
"""


@pytest.fixture(scope="module")
def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    frame = simulate(scenario_named("good", 300), seed=1)
    return frame[frame["pool"] == "crowd"].reset_index(drop=True), frame[frame["pool"] == "trusted"]


def _config(tmp: Path) -> Path:
    config = tmp / "gate.yaml"
    config.write_text(CONFIG.format(store=(tmp / "r.db").as_posix(), reports=(tmp / "rep").as_posix()),
                      encoding="utf-8")
    return config


@pytest.mark.parametrize("first", ["empty", "nul"])
def test_missing_ids_and_nul_ids_are_two_keys(tmp_path, tables, first):
    # Encoding 1 wrote a missing cell as "\x00": these two batches shared one content hash, and the second was
    # served the first's decision (a not_null REJECT for a valid batch, or an ACCEPT for ids that are missing).
    # The NUL ids come in a Parquet file: a CSV file holding a NUL byte is refused (the next test).
    pytest.importorskip("pyarrow")
    crowd, trusted = tables
    trusted.to_csv(tmp_path / "trusted.csv", index=False)
    ids = crowd["item_id"].astype(object)
    crowd.assign(item_id=ids.where(crowd.index >= 3, None)).to_parquet(tmp_path / "empty.parquet", index=False)
    crowd.assign(item_id=ids.where(crowd.index >= 3, "\x00")).to_parquet(tmp_path / "nul.parquet", index=False)
    second = "nul" if first == "empty" else "empty"
    config = _config(tmp_path)
    one = run(config, tmp_path / f"{first}.parquet", tmp_path / "trusted.csv")
    two = run(config, tmp_path / f"{second}.parquet", tmp_path / "trusted.csv")
    assert one["batch_hash"] != two["batch_hash"] and one["inputs_digest"] != two["inputs_digest"]
    assert not two["reused"] and two.get("reused_from") is None
    assert any("not_null" in reason for reason in (one if first == "empty" else two)["reasons"])


@pytest.mark.parametrize("cell", ["\x00", "a\x00b"])
def test_a_csv_holding_a_nul_byte_is_an_error_not_another_table(tmp_path, tables, cell):
    # pandas < 3's C parser ends a field at a NUL: "\x00" was read as a missing id and "a\x00b" as "a", so the gate
    # judged (and keyed its decision by) a table that is not the file. Every pandas now refuses the byte.
    crowd, trusted = tables
    trusted.to_csv(tmp_path / "trusted.csv", index=False)
    lines = crowd.to_csv(index=False).splitlines(keepends=True)
    (tmp_path / "nul.csv").write_text("".join(lines[:1] + [cell + line for line in lines[1:4]] + lines[4:]),
                                      encoding="utf-8")
    result = run(_config(tmp_path), tmp_path / "nul.csv", tmp_path / "trusted.csv")
    assert result["decision"] == "ERROR"
    assert any("NUL byte" in reason and "nul.csv" in reason for reason in result["reasons"])


def test_batch_files_differing_after_the_first_dot_are_two_batches(tmp_path, tables):
    crowd, trusted = tables
    trusted.to_csv(tmp_path / "trusted.csv", index=False)
    crowd.to_csv(tmp_path / "wk1.good.csv", index=False)
    shuffled = crowd.assign(label=crowd["label"].sample(frac=1.0, random_state=0).to_numpy())
    shuffled.to_csv(tmp_path / "wk1.bad.csv", index=False)
    config = _config(tmp_path)
    good = run(config, tmp_path / "wk1.good.csv", tmp_path / "trusted.csv")
    bad = run(config, tmp_path / "wk1.bad.csv", tmp_path / "trusted.csv")
    assert (good["batch_id"], bad["batch_id"]) == ("wk1.good", "wk1.bad")
    assert good["decision"] == "ACCEPT" and bad["decision"] != "ACCEPT"
    store = ResultsStore(f"sqlite:///{(tmp_path / 'r.db').as_posix()}")
    assert store.current("wk1.good").run_id == good["run_id"]
    assert store.current("wk1.bad").run_id == bad["run_id"]
    assert store.current("wk1") is None
