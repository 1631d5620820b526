"""The review's sixth and ninth probes end to end: a duplicated YAML key cannot loosen a gate, and two batch files
are two batch ids unless their names say otherwise."""

from __future__ import annotations

from labelgate.gate import run
from labelgate.pipeline.synth import scenario_named, simulate

LOOSENED = """
gates:
  - type: normalized_cross_kappa
    min_value: 0.8
interval: {{n_boot: 100, seed: 0}}
store: {{url: "sqlite:///{store}"}}
reports: {{dir: "{reports}"}}
gates:
  - type: normalized_cross_kappa
    min_value: -1
"""


def test_a_second_gates_key_is_refused_and_the_contentment_batch_is_not_accepted(tmp_path):
    batch = tmp_path / "contentment.csv"
    simulate(scenario_named("contentment", 300), seed=3).to_csv(batch, index=False)
    config = tmp_path / "gate.yaml"
    config.write_text(LOOSENED.format(store=(tmp_path / "r.db").as_posix(), reports=(tmp_path / "rep").as_posix()),
                      encoding="utf-8")
    summary = run(config, batch)
    assert summary["decision"] == "ERROR" and summary["error_step"] == "config"
    assert "'gates' is set twice" in summary["reasons"][0] and "line 8" in summary["reasons"][0] and "first on line 2" in summary["reasons"][0]


def test_two_files_of_one_prefix_are_two_batches(tmp_path):
    good = simulate(scenario_named("good", 300), seed=1)
    good.to_csv(tmp_path / "wk1.good.csv", index=False)
    simulate(scenario_named("contentment", 300), seed=3).to_csv(tmp_path / "wk1.bad.csv.gz", index=False)
    config = tmp_path / "gate.yaml"
    config.write_text(LOOSENED.split("gates:\n  - type: normalized_cross_kappa\n    min_value: -1")[0].format(
        store=(tmp_path / "r.db").as_posix(), reports=(tmp_path / "rep").as_posix()), encoding="utf-8")
    one, two = run(config, tmp_path / "wk1.good.csv"), run(config, tmp_path / "wk1.bad.csv.gz")
    assert (one["batch_id"], one["decision"]) == ("wk1.good", "ACCEPT")
    assert (two["batch_id"], two["decision"]) == ("wk1.bad", "REJECT")
