"""Gate configuration: every validation error names the file and the key; secrets stay out of the file."""

from __future__ import annotations

import pandas as pd
import pytest

import labelgate as lg
from labelgate.gate.steps import require_rows
from labelgate.pipeline.config import ConfigError, GateConfig, config_from_dict, load_config
from labelgate.pipeline.synth import PoolSpec, Scenario, scenario_named, simulate


@pytest.mark.parametrize(("data", "message"), [
    ({"store": {"url": "postgresql://u:secret@db/lg"}}, "store: Value error, the store URL holds credentials"),
    ({"alerts": {"channels": [{"type": "webhook"}]}}, "alerts.channels[0]: Value error, channel type 'webhook' "
                                                      "needs 'url_env'"),
    ({"alerts": {"channels": [{"type": "prefect_block"}]}}, "alerts.channels[0]: Value error, channel type "
                                                            "'prefect_block' needs 'block'"),
    ({"questions": [{"name": "q"}, {"name": "q"}]}, "<top level>: Value error, question names must be unique"),
    ({"gates": [{"type": "cross_kappa", "min_value": 0.2, "questions": ["nope"]}]},
     "gate 'cross_kappa' names unknown question(s) ['nope']"),
    ({"gates": [{"type": "spa", "min_value": 0.9, "max_value": 0.5}]}, "min_value 0.9 is greater than max_value 0.5"),
    ({"gates": [{"type": "irr_baseline"}]}, "gate type 'irr_baseline' needs 'tolerance' or 'min_ratio'"),
    ({"gates": [{"type": "spa"}]}, "gate type 'spa' needs 'min_value' and/or 'max_value'"),
    ({"batch": {"format": "sql", "query": "select 1"}}, "format 'sql' needs both 'query' and 'url_env'"),
    ({"interval": {"n_boot": 1}}, "interval.n_boot: Input should be greater than or equal to 2"),
    ({"alerts": {"notify_on": ["MAYBE"]}}, "alerts.notify_on[0]: Input should be"),
])
def test_invalid_values_name_the_key(data, message):
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, source="gate.yaml")
    assert str(info.value).startswith("gate.yaml: ") and message in str(info.value)


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("gates: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"{bad}: not valid YAML"):
        load_config(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="the configuration must be a mapping of keys; got str"):
        load_config(scalar)


def test_empty_file_gives_the_defaults(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    assert load_config(empty) == GateConfig()


def test_digest_ignores_execution_settings_but_not_thresholds():
    base = GateConfig()
    moved = config_from_dict({"runner": "dask", "store": {"url": "sqlite:///other.db"}, "reports": {"dir": "x"}})
    stricter = config_from_dict({"gates": [{"type": "normalized_cross_kappa", "min_value": 0.9}]})
    assert moved.digest() == base.digest()
    assert stricter.digest() != base.digest()


def test_synthetic_scenarios_reject_impossible_designs():
    with pytest.raises(lg.ParameterError, match="at least one item and two categories"):
        simulate(Scenario(n_items=0))
    with pytest.raises(lg.ParameterError, match="ratings_per_item must be 1 <= low <= high"):
        simulate(Scenario(pools=(PoolSpec("crowd", ratings_per_item=(3, 2)),)))
    with pytest.raises(lg.ParameterError, match="4 ratings per item need at least 4 raters"):
        simulate(Scenario(pools=(PoolSpec("crowd", n_raters=3, ratings_per_item=(2, 4)),)))
    with pytest.raises(lg.ParameterError, match="'name' parameter of scenario_named must be one of"):
        scenario_named("chaos")


def test_no_valid_row_left_is_an_input_error():
    with pytest.raises(lg.InputError, match="No valid row is left in the batch table") as info:
        require_rows(pd.DataFrame({"item_id": []}), "batch")
    assert info.value.code == lg.Reason.EMPTY_INPUT


def test_the_spans_boxes_and_sets_example_configs_load() -> None:
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[2] / "configs" / "spans-boxes-sets.example.yaml"
    examples = yaml.safe_load(path.read_text(encoding="utf-8"))
    kinds = {name: config_from_dict(block, f"{path.name}: {name}").questions[0] for name, block in examples.items()}
    assert (kinds["ner"].kind, kinds["detection"].kind, kinds["multilabel"].level) == ("spans", "boxes", "set")
    assert kinds["ner"].spans is not None and kinds["detection"].boxes is not None and kinds["multilabel"].sep == "|"


@pytest.mark.parametrize(("question", "words"), [
    ({"name": "t", "level": "set"}, "'level: set' needs 'distance'"),
    ({"name": "t", "kind": "spans", "level": "ordinal"}, "'kind: spans' is measured per unit"),
    ({"name": "t", "distance": "masi"}, "'distance' applies to 'level: set' only"),
    ({"name": "t", "boxes": {"iou": 0.5}}, "'boxes' \\(its columns\\) needs 'kind: boxes'"),
    ({"name": "t", "kind": "boxes", "boxes": {"iou": 0}}, "greater than 0"),
    ({"name": "t", "kind": "spans", "spans": {"begin": "b"}}, "begin"),
])
def test_a_bad_kind_or_set_key_is_named(question: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as bad:
        config_from_dict({"questions": [question]}, "gate.yaml")
    assert "questions[0]" in str(bad.value)


def test_spans_beside_another_question_need_the_question_column() -> None:
    with pytest.raises(ConfigError, match="columns.question"):
        config_from_dict({"questions": [{"name": "ner", "kind": "spans"}, {"name": "tone"}]}, "gate.yaml")


SQL_AGGREGATE = {"format": "sql", "query": "select 1", "url_env": "DB", "aggregate": True}


@pytest.mark.parametrize(("question", "named"), [
    ({"name": "topics", "level": "set", "distance": "jaccard"}, "'topics' (level: set)"),
    ({"name": "ner", "kind": "spans"}, "'ner' (kind: spans)"),
    ({"name": "objects", "kind": "boxes"}, "'objects' (kind: boxes)"),
])
@pytest.mark.parametrize("where", ["batch", "sources.weekly"])
def test_sets_spans_and_boxes_are_not_aggregated_in_the_database(question: dict, named: str, where: str) -> None:
    # a named source (the one a labelgate.batch.ready event asks for) is refused as the batch is: the gate would
    # otherwise measure each span or box row in the database as one label of its text or image
    where_ = {"batch": SQL_AGGREGATE} if where == "batch" else {"sources": {"weekly": SQL_AGGREGATE}}
    with pytest.raises(ConfigError) as refused:
        config_from_dict({**where_, "questions": [question]}, "gate.yaml")
    message = str(refused.value)
    assert named in message and f"{where} set 'aggregate: true'" in message
    assert "set 'aggregate: false' there, and the gate reads the query's rows" in message  # the supported route
    config_from_dict({**{k: {**v, "aggregate": False} if k == "batch" else {"weekly": {**SQL_AGGREGATE,
                                                                                       "aggregate": False}}
                         for k, v in where_.items()}, "questions": [question]}, "gate.yaml")


# ------------------------------------------------------------------------------------------------ duplicate keys
LOOSENED = """gates:
  - type: normalized_cross_kappa
    min_value: 0.8
interval: {n_boot: 100, seed: 0}
gates:
  - type: normalized_cross_kappa
    min_value: -1
"""


def test_a_duplicate_top_level_key_is_a_config_error_naming_key_line_and_file(tmp_path):
    # PyYAML keeps the last copy: the second `gates:` silently loosened the gate to min_value -1
    path = tmp_path / "gate.yaml"
    path.write_text(LOOSENED, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"gate\.yaml: line 5: the key 'gates' is set twice \(first on line 1\)"):
        load_config(path)


def test_a_duplicate_nested_key_is_a_config_error(tmp_path):
    path = tmp_path / "gate.yaml"
    path.write_text("gates:\n  - type: normalized_cross_kappa\n    min_value: 0.8\n"
                    "interval:\n  n_boot: 100\n  seed: 0\n  n_boot: 10\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"line 7: the key 'n_boot' is set twice \(first on line 5\)") as caught:
        load_config(path)
    assert str(path) in str(caught.value)
    flow = tmp_path / "flow.yaml"  # a flow mapping, inside a list item
    flow.write_text("gates:\n  - {type: normalized_cross_kappa, min_value: 0.8, min_value: -1}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"line 2: the key 'min_value' is set twice"):
        load_config(flow)


def test_a_key_merged_in_and_set_again_is_a_duplicate(tmp_path):
    path = tmp_path / "gate.yaml"
    path.write_text("interval:\n  <<: {n_boot: 100}\n  n_boot: 10\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"the key 'n_boot' is set twice"):
        load_config(path)


def test_the_same_key_in_two_mappings_is_no_duplicate(tmp_path):
    path = tmp_path / "gate.yaml"
    path.write_text("gates:\n  - type: normalized_cross_kappa\n    min_value: 0.8\n"
                    "  - type: cross_kappa\n    min_value: 0.5\n"
                    "interval: {n_boot: 100, seed: 0}\n", encoding="utf-8")
    cfg = load_config(path)
    assert [g.min_value for g in cfg.gates] == [0.8, 0.5] and cfg.interval.n_boot == 100
