"""Pre-flight checks (headers only) and path resolution: each bad input is answered with a message naming it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from labelgate.errors import InputError
from labelgate.pipeline.config import GateConfig, load_config, resolve_paths
from labelgate.pipeline.preflight import check_inputs, read_header

CFG = GateConfig.model_validate({"questions": [{"name": "q", "label_column": "answer"}]})


def test_no_batch_given():
    with pytest.raises(InputError, match="No batch given"):
        check_inputs(CFG, None, None)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(InputError, match="nope.csv does not exist"):
        check_inputs(CFG, tmp_path / "nope.csv", None)


def test_a_missing_label_column_is_named_with_the_columns_found(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("item_id,rater_id,label,pool\n1,a,x,crowd\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"Column 'answer' \(the label column of question 'q'\).*\['item_id'"):
        check_inputs(CFG, path, None)


def test_one_file_needs_the_pool_column_two_files_do_not(tmp_path):
    batch, trusted = tmp_path / "b.csv", tmp_path / "t.csv"
    for path in (batch, trusted):
        path.write_text("item_id,rater_id,answer\n1,a,x\n", encoding="utf-8")
    check_inputs(CFG, batch, trusted)  # two files: the pools are the files
    with pytest.raises(InputError, match="'pool'"):
        check_inputs(CFG, batch, None)


def test_parquet_headers_are_read_from_the_schema(tmp_path):
    path = tmp_path / "b.parquet"
    pd.DataFrame({"item_id": ["1"], "rater_id": ["a"], "answer": ["x"], "pool": ["crowd"]}).to_parquet(path)
    assert read_header(path) == ["item_id", "rater_id", "answer", "pool"]
    check_inputs(CFG, path, None)
    broken = tmp_path / "broken.parquet"
    broken.write_text("not parquet", encoding="utf-8")
    with pytest.raises(InputError, match="broken.parquet is not a readable Parquet file"):
        read_header(broken)


def test_paths_set_in_the_config_resolve_against_its_folder(tmp_path):
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "gate.yaml").write_text(
        "batch: {path: data/b.csv}\ntrusted: {path: /abs/t.csv}\nstore: {url: 'sqlite:///r.db'}\n"
        "reports: {dir: out}\n", encoding="utf-8")
    cfg = load_config(folder / "gate.yaml")
    base = folder.resolve()
    assert cfg.batch.path == str(base / "data" / "b.csv")
    assert cfg.trusted.path == "/abs/t.csv"  # absolute paths stay
    assert cfg.store.url == f"sqlite:///{base / 'r.db'}"
    assert cfg.reports.dir == str(base / "out")
    defaults = resolve_paths(GateConfig(), base)  # defaults the file does not set stay relative to the cwd
    assert defaults.reports.dir == "reports" and defaults.store.url == "sqlite:///labelgate-results.db"
    memory = resolve_paths(GateConfig.model_validate({"store": {"url": "sqlite:///:memory:"}}), base)
    assert memory.store.url == "sqlite:///:memory:"


def test_a_project_not_made_by_labelgate_is_refused(tmp_path: Path):
    import great_expectations as gx

    from labelgate.gx.project import project_context

    context = gx.get_context(mode="file", project_root_dir=str(tmp_path))
    config = Path(context.root_directory) / "great_expectations.yml"
    text = config.read_text(encoding="utf-8")
    assert "class_name: ExpectationsStore\n" in text
    # a team's own expectations store (here only marked by a comment): LabelGate must not rewrite it
    config.write_text(text.replace("class_name: ExpectationsStore\n", "class_name: ExpectationsStore  # ours\n"),
                      "utf-8")
    with pytest.raises(RuntimeError, match="is not a LabelGate GX project"):
        project_context(tmp_path)


def test_a_crashed_flow_run_reads_as_error():
    from prefect.states import Completed, Failed

    from labelgate.flows.gate import GateRunError, summary_of_state

    crashed = summary_of_state(Failed(message="boom", data=ValueError("worker lost")))
    assert crashed["decision"] == "ERROR" and "worker lost" in crashed["reasons"][0]
    failed = summary_of_state(Failed(data=GateRunError({"decision": "ERROR", "reasons": ["load: x"]})))
    assert failed["reasons"] == ["load: x"]
    assert summary_of_state(Completed(data={"decision": "ACCEPT"}))["decision"] == "ACCEPT"


def test_a_row_selection_column_missing_from_the_header_is_named(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("item_id,rater_id,answer,pool\n1,a,x,crowd\n", encoding="utf-8")
    cfg = GateConfig.model_validate({"questions": [{"name": "q", "label_column": "answer"}],
                                     "batch": {"where": {"vendor": "b"}}})
    with pytest.raises(InputError, match=r"Column 'vendor' \(the column of batch.where\) is missing"):
        check_inputs(cfg, path, None)
    both = GateConfig.model_validate({"questions": [{"name": "q", "label_column": "answer"}],
                                      "trusted": {"where": {"team": "experts"}}})
    with pytest.raises(InputError, match=r"Column 'team' \(the column of trusted.where\)"):
        check_inputs(both, path, None)  # one file holds both pools: the trusted selection reads it too
