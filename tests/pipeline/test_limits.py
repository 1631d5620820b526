"""Bounds instead of hangs: every documented limit (``labelgate.pipeline.limits``) is refused at the boundary with a
message naming the key, column or file and the value.

The inputs that used to hang (a trillion resamples, an alias bomb, a 200,000-column CSV) are fed as they are: no
timing assertion, the test finishing is the proof that the answer comes at once.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from labelgate.errors import InputError
from labelgate.pipeline import limits
from labelgate.pipeline.config import (
    Columns,
    ConfigError,
    GateConfig,
    Source,
    config_from_dict,
    load_config,
    monitor_config_from_dict,
)
from labelgate.pipeline.preflight import check_inputs, read_header
from labelgate.pipeline.sources import load_table
from labelgate.pipeline.validation import categories_for, validate


def _config_error(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, source="gate.yaml")
    return str(info.value)


# ------------------------------------------------------------------------------------------- resamples
@pytest.mark.parametrize("key", ["n_boot", "diagnose_n_boot"])
def test_resamples_above_the_limit_are_refused(key):
    message = _config_error({"interval": {key: 1_000_000_000_000}})
    assert f"interval.{key}" in message and "100000" in message and "1000000000000" in message
    assert config_from_dict({"interval": {key: limits.MAX_N_BOOT}}).interval.model_dump()[key] == limits.MAX_N_BOOT


def test_the_monitors_resamples_are_bounded_too():
    with pytest.raises(ConfigError, match=r"monitor\.n_boot: Input should be less than or equal to 100000 "
                                          r"\(got 1000000000000\)"):
        monitor_config_from_dict({"monitor": {"n_boot": 1_000_000_000_000}}, source="monitor.yaml")


def test_a_trillion_resamples_in_a_file_is_a_config_error(tmp_path):
    path = tmp_path / "gate.yaml"
    path.write_text("interval:\n  n_boot: 1000000000000\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"gate\.yaml: interval\.n_boot: .*100000"):
        load_config(path)


# ------------------------------------------------------------------------------------------- thresholds
@pytest.mark.parametrize(("gate", "key", "problem"), [
    ({"type": "cross_kappa", "min_value": float("nan")}, "min_value", "finite number (got nan)"),
    ({"type": "normalized_cross_kappa", "min_value": float("inf")}, "min_value", "finite number (got inf)"),
    ({"type": "irr_baseline", "tolerance": float("-inf")}, "tolerance", "finite number (got -inf)"),
    ({"type": "spa", "max_value": float("nan")}, "max_value", "finite number"),
    ({"type": "normalized_cross_kappa", "min_value": 1.5}, "min_value", "normalized κx, [-1, 1], for gate type"),
    ({"type": "cross_kappa", "min_value": -1.01}, "min_value", "κx, [-1, 1]"),
    ({"type": "spa", "min_value": -0.1}, "min_value", "SPA, a probability, [0, 1]"),
    ({"type": "spa", "max_value": 1.2}, "max_value", "SPA, a probability, [0, 1]"),
    ({"type": "irr_baseline", "tolerance": -0.1}, "tolerance", "[0, 2]"),
    ({"type": "irr_baseline", "tolerance": 0.1, "max_excess": 3}, "max_excess", "[0, 2]"),
    ({"type": "irr_baseline", "min_ratio": 0}, "min_ratio", "a ratio of two IRRs, > 0"),
    ({"type": "labeler_icc", "margin": -0.2}, "margin", "a gap between two ICCs, [0, 1]"),
    ({"type": "irr_baseline", "tolerance": 0.1, "min_value": 0.5}, "min_value",
     "not a threshold of gate type 'irr_baseline' (got 0.5)"),
])
def test_thresholds_must_be_finite_and_in_their_metrics_range(gate, key, problem):
    message = _config_error({"gates": [gate]})
    assert f"gates[0].{key}:" in message and problem in message


def test_nan_and_inf_written_in_yaml_are_refused_when_the_file_is_read(tmp_path):
    for text, key in (("min_value: .nan", "min_value"), ("min_value: .inf", "min_value")):
        path = tmp_path / "gate.yaml"
        path.write_text(f"gates:\n  - type: cross_kappa\n    {text}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=rf"gates\[0\]\.{key}: Input should be a finite number"):
            load_config(path)


def test_thresholds_at_the_ends_of_their_ranges_are_valid():
    config_from_dict({"gates": [{"type": "cross_kappa", "min_value": -1}, {"type": "spa", "min_value": 0,
                                                                            "max_value": 1},
                                {"type": "irr_baseline", "tolerance": 0, "max_excess": 2, "min_ratio": 0.01},
                                {"type": "labeler_icc", "margin": 1}]})


# ------------------------------------------------------------------------------------------- categories
def test_too_many_listed_categories_name_the_key():
    message = _config_error({"questions": [{"name": "q", "categories": list(range(limits.MAX_CATEGORIES + 1))}]})
    assert "questions[0].categories" in message and "at most 1000 items" in message


def test_too_many_categories_in_the_trusted_replication_name_the_question():
    config = GateConfig()
    trusted = pd.DataFrame({"label": [f"text {i}" for i in range(limits.MAX_CATEGORIES + 1)]})
    with pytest.raises(InputError, match=r"1001 distinct labels for question 'label', more than the limit of 1000"):
        categories_for(config, config.questions[0], trusted)


# ------------------------------------------------------------------------------------------- YAML
BOMB = "\n".join(["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)])


def test_a_yaml_alias_bomb_is_refused(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bomb\.yaml: not valid YAML \(line 1, column 4: YAML anchor &a — anchors "
                                          r"and aliases are not allowed"):
        load_config(path)


def test_an_alias_inside_categories_is_refused(tmp_path):
    path = tmp_path / "gate.yaml"
    path.write_text("questions:\n  - name: q\n    categories: *cats\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"line 3, column 17: YAML alias \*cats"):
        load_config(path)


def test_a_configuration_file_larger_than_the_limit_is_refused(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("# padding\n" * (limits.MAX_CONFIG_BYTES // 10 + 1), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"big\.yaml: the configuration file is larger than the limit of 1048576"):
        load_config(path)


# ------------------------------------------------------------------------------------------- columns
def _wide_csv(path: Path, n_columns: int) -> Path:
    header = ",".join(["item_id", "rater_id", "label", "pool"] + [f"extra_{i}" for i in range(n_columns - 4)])
    row = ",".join(["1", "a", "pos", "crowd"] + ["0"] * (n_columns - 4))
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as handle:
        handle.write(f"{header}\n{row}\n")
    return path


@pytest.mark.parametrize("name", ["wide.csv", "wide.csv.gz"])
def test_a_200000_column_csv_is_refused_by_the_loader_and_the_preflight(tmp_path, name):
    path = _wide_csv(tmp_path / name, 200_000)
    with pytest.raises(InputError, match=r"The batch file .*wide\.csv.* has at least \d+ columns, more than the "
                                         r"limit of 10000"):
        load_table(Source(), path, columns=Columns(), role="batch")
    with pytest.raises(InputError, match=r"The batch file .* columns, more than the limit of 10000"):
        check_inputs(GateConfig(), path, None)


def test_the_column_limit_counts_exactly(tmp_path):
    assert len(read_header(_wide_csv(tmp_path / "ok.csv", limits.MAX_COLUMNS))) == limits.MAX_COLUMNS
    with pytest.raises(InputError, match="has 10001 columns, more than the limit of 10000"):
        read_header(_wide_csv(tmp_path / "over.csv", limits.MAX_COLUMNS + 1), role="batch")


def test_a_wide_parquet_file_is_refused_from_its_schema(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "wide.parquet"
    pq.write_table(pa.table({f"c{i}": pa.array([1], pa.int8()) for i in range(limits.MAX_COLUMNS + 1)}), path)
    with pytest.raises(InputError, match="wide.parquet' has 10001 columns, more than the limit of 10000"):
        load_table(Source(), path, role="trusted")


def test_a_header_line_longer_than_the_limit_is_refused(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("item_id,rater_id," + "x" * (limits.MAX_HEADER_CHARS + 1) + "\n1,a,b\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"header line of the batch file .* is longer than the limit of 1048576 "
                                         "characters"):
        check_inputs(GateConfig(), path, None)


# ------------------------------------------------------------------------------------------- labels
def test_a_label_longer_than_the_limit_is_quarantined_with_column_row_and_prefix():
    long_label = "spam" * 2000
    df = pd.DataFrame({"item_id": ["1", "1", "2"], "rater_id": ["a", "b", "a"], "label": ["pos", long_label, "neg"],
                       "pool": "crowd"}, index=[7, 8, 9])
    result = validate(df, GateConfig(), {"label": ("neg", "pos")}, pool="crowd")
    assert result.n_invalid == 1 and result.error_counts["label:too_long"] == 1
    row = result.quarantine.iloc[0]
    assert row["_row"] == 8
    reasons = row["_reasons"]
    assert "label: too_long: row 8: 'spamspam" in reasons
    assert "(8000 characters) is longer than the limit of 1000 characters" in reasons
    assert long_label not in reasons and len(reasons) < 500  # the value is quoted cut short, in every reason


def test_a_label_at_the_limit_is_valid():
    label = "x" * limits.MAX_LABEL_CHARS
    df = pd.DataFrame({"item_id": ["1"], "rater_id": ["a"], "label": [label], "pool": "crowd"})
    assert validate(df, GateConfig(), {"label": (label,)}, pool="crowd").n_invalid == 0
