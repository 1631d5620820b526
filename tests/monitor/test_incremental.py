"""Monitor: incremental equals batch (hypothesis), idempotent deliveries, per-rater rows, sources, history, CLI."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import labelgate as lg
from labelgate.cli.monitor import register
from labelgate.metrics.diagnostics import rater_diagnostics
from labelgate.monitor import Monitor, cusum, history, load_monitor_config, monitor_config_from_dict, rater_store
from labelgate.pipeline.config import ConfigError

IRR = {"krippendorff_alpha": lg.krippendorff_alpha, "fleiss_kappa": lg.fleiss_kappa, "gwet_ac": lg.gwet_ac}


def make_config(root: Path, **monitor) -> dict:
    question = monitor.pop("question", {"name": "label"})
    extra = monitor.pop("extra", {})
    return {
        "store": {"url": f"sqlite:///{root / 'results.db'}"},
        "questions": [question],
        "monitor": {"source": {"path": str(root / "drop")}, **monitor},
        **extra,
    }


def deliver(root: Path, name: str, frame: pd.DataFrame) -> Path:
    (root / "drop").mkdir(parents=True, exist_ok=True)
    path = root / "drop" / name
    frame.to_csv(path, index=False)
    return path


def defined_value(fn, *args, **kw) -> float | None:
    """``fn(*args, **kw).value``, or None where the core says the coefficient is undefined (a design error or NaN):
    what the monitor stores for it."""
    try:
        v = fn(*args, **kw).value
    except lg.DesignError:
        return None
    return None if np.isnan(v) else float(v)


def core_expected(
    frames: list[pd.DataFrame],
    categories: list,
    level: str,
    irr: str = "krippendorff_alpha",
    weighting: str = "annotations_m1",
) -> dict:
    """The core's metrics on all judgements at once (first delivery of a judgement wins)."""
    data = pd.concat(frames, ignore_index=True).drop_duplicates(["pool", "item_id", "rater_id"], keep="first")
    data = data.assign(item_id=data["item_id"].astype(str), rater_id=data["rater_id"].astype(str))
    sets = {"distance": "masi"} if level == "set" else {}  # label sets: MASI (tests/monitor/test_restatements.py)
    pools = lg.ratings_by_pool(data, level=level, categories=categories, **sets)
    crowd, trusted = pools.get("crowd"), pools.get("trusted")

    out = {
        "spa": defined_value(lg.spa, crowd, weighting=weighting) if crowd else None,
        "irr_crowd": defined_value(IRR[irr], crowd) if crowd else None,
        "irr_trusted": defined_value(IRR[irr], trusted) if trusted else None,
    }
    both = crowd is not None and trusted is not None
    out["cross_kappa"] = defined_value(lg.cross_kappa, crowd, trusted) if both else None
    out["normalized_cross_kappa"] = (
        defined_value(lg.normalized_cross_kappa, crowd, trusted, irr=irr) if both else None
    )
    return {"metrics": out, "crowd": crowd, "trusted": trusted}


def assert_close(got, expected, what):
    if expected is None:
        assert got is None, f"{what}: expected undefined, got {got}"
    else:
        assert got is not None, f"{what}: expected {expected}, got None"
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12), what


judgement = st.tuples(
    st.integers(0, 7), st.integers(0, 4), st.integers(0, 2), st.sampled_from(["crowd", "trusted"])
)
deliveries = st.lists(st.lists(judgement, min_size=1, max_size=25), min_size=1, max_size=4)
LABELS = {"nominal": ["a", "b", "c"], "ordinal": [1, 2, 3], "interval": [1.5, 2.0, 4.0],
          "set": [(), ("a",), ("a", "b")]}


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    batches=deliveries,
    level=st.sampled_from(["nominal", "ordinal", "interval"]),
    irr=st.sampled_from(["krippendorff_alpha", "fleiss_kappa", "gwet_ac"]),
    redeliver=st.integers(0, 3),
    weighting=st.sampled_from(["annotations_m1", "inv_var_class", "flat"]),
    fold=st.sampled_from([rater_store.FOLD_ROWS, 1, 3]),
)
def test_incremental_equals_batch_after_any_sequence_of_deliveries(
    tmp_path_factory, monkeypatch, batches, level, irr, redeliver, weighting, fold
):
    # fold: the pending pair tallies are folded into the main table at the default cadence, every pass, every few rows
    monkeypatch.setattr(rater_store, "FOLD_ROWS", fold)
    root = tmp_path_factory.mktemp("inc")
    question = {"name": "label", "level": level}
    if level == "ordinal":
        question["categories"] = LABELS["ordinal"]
    cfg = monitor_config_from_dict(
        make_config(
            root,
            question=question,
            irr=irr,
            spa_weighting=weighting,
            raters={"min_pair_items": 2, "min_shared_items": 2},
        )
    )
    frames = []
    summary = None
    for k, batch in enumerate(batches):
        frame = pd.DataFrame(
            [
                {"item_id": f"i{i}", "rater_id": f"{pool[0]}{r}", "label": LABELS[level][c], "pool": pool}
                for i, r, c, pool in batch
            ]
        )
        path = deliver(root, f"d{k}.csv", frame)
        frames.append(frame)
        summary = Monitor(cfg).run_pass(send_alerts=False)
        if k == redeliver % len(batches):  # the same file again under another name: nothing changes
            shutil.copy(path, root / "drop" / f"copy-of-d{k}.csv")
            again = Monitor(cfg).run_pass(send_alerts=False)
            assert again["n_new"] == 0 and again["deliveries"][0]["status"] == "duplicate"
    assert Monitor(cfg).run_pass(send_alerts=False)["n_new"] == 0  # nothing new: no delivery re-read
    result = Monitor(cfg).run_pass(send_alerts=False)["questions"]["label"]
    cumulative = result["cumulative"]
    expected = core_expected(frames, result["categories"], level, irr, weighting)
    for metric, value in expected["metrics"].items():
        assert_close(cumulative[metric]["value"], value, metric)
    # per-rater rows equal the core diagnostics on all judgements at once (judged across the pool when read)
    for pool_name, row, got in rater_pairs(cfg, expected, result["center"]):
        for key in ("kappa_ci_low", "kappa_ci_high", "loo_ci_low", "loo_ci_high"):
            if row[key] is None:
                assert got[key] is None
            else:
                assert got[key] == pytest.approx(row[key], rel=1e-6, abs=1e-6), key
        for key in ("n_ratings", "n_shared_items", "n_loo_items", "flags", "partners", "judged"):
            assert got[key] == row[key], f"{pool_name} {row['rater_id']} {key}"
        assert (got["p_value"] is None) == (row["p_value"] is None)
        if row["p_value"] is not None:
            assert got["p_value"] == pytest.approx(row["p_value"], rel=1e-6, abs=1e-9)
    assert summary is not None


def rater_pairs(cfg, expected, center):
    """(pool, core row, monitor row) for every rater of the core diagnostics on all judgements at once, after
    checking the point values (the monitor's rows are judged across the pool when read)."""
    rows = {(r["pool"], r["rater_id"]): r for r in history(cfg)["raters"]}
    crowd, trusted = expected["crowd"], expected["trusted"]
    checks = {"min_pair_items": 2, "min_shared_items": 2, "center": center}
    for pool_name, pool, ref in (("crowd", crowd, trusted), ("trusted", trusted, None)):
        if pool is None:
            continue
        for row in rater_diagnostics(pool, ref, pool_name=pool_name, **checks):
            got = rows[(pool_name, row["rater_id"])]
            for key in ("kappa_vs_trusted", "loo_agreement", "bias"):
                assert_close(got[key], row[key], f"{pool_name} {row['rater_id']} {key}")
            yield pool_name, row, got


def test_cumulative_intervals_are_close_to_the_core_bootstrap(tmp_path):
    from labelgate.pipeline.synth import Scenario, simulate

    data = simulate(Scenario(n_items=1500), seed=4)
    cfg = monitor_config_from_dict(make_config(tmp_path))
    shuffled = data.sample(frac=1, random_state=0).drop(columns=["timestamp"])
    for k, rows in enumerate(np.array_split(np.arange(len(shuffled)), 3)):
        deliver(tmp_path, f"d{k}.csv", shuffled.iloc[rows])
    cumulative = Monitor(cfg).run_pass(send_alerts=False)["questions"]["label"]["cumulative"]
    pools = lg.ratings_by_pool(data)
    core = {
        "spa": lg.spa(pools["crowd"], ci=0.95, n_boot=2000, seed=1),
        "irr_crowd": lg.krippendorff_alpha(pools["crowd"], ci=0.95, n_boot=2000, seed=1),
        "cross_kappa": lg.cross_kappa(pools["crowd"], pools["trusted"], ci=0.95, n_boot=2000, seed=1),
        "normalized_cross_kappa": lg.normalized_cross_kappa(
            pools["crowd"], pools["trusted"], ci=0.95, n_boot=2000, seed=1
        ),
    }
    for metric, est in core.items():
        row = cumulative[metric]
        assert row["value"] == pytest.approx(est.value, abs=1e-12)
        width, core_width = row["ci_high"] - row["ci_low"], est.ci[1] - est.ci[0]
        assert width == pytest.approx(core_width, rel=0.2), metric
        assert row["n_items"] == est.n_items and row["n_ratings"] == est.n_ratings


def test_a_redelivered_file_changes_nothing_and_conflicts_are_counted(tmp_path):
    cfg = monitor_config_from_dict(make_config(tmp_path))
    first = pd.DataFrame(
        {
            "item_id": ["1", "1", "2", "2", "1"],
            "rater_id": ["a", "b", "a", "b", "t"],
            "label": ["x", "x", "y", "x", "x"],
            "pool": ["crowd"] * 4 + ["trusted"],
        }
    )
    deliver(tmp_path, "first.csv", first)
    one = Monitor(cfg).run_pass(send_alerts=False)
    assert one["n_new"] == 5
    # same rows in another order and file: same content hash
    deliver(tmp_path, "again.csv", first.iloc[::-1])
    again = Monitor(cfg).run_pass(send_alerts=False)
    assert again["n_new"] == 0 and again["deliveries"][0]["status"] == "duplicate"
    # overlapping delivery: known judgements are recognised one by one; a different label is a conflict
    overlap = pd.DataFrame(
        {
            "item_id": ["1", "2", "3", "3"],
            "rater_id": ["a", "b", "a", "b"],
            "label": ["x", "y", "y", "y"],
            "pool": ["crowd"] * 4,
        }
    )
    deliver(tmp_path, "overlap.csv", overlap)
    third = Monitor(cfg).run_pass(send_alerts=False)
    d = third["deliveries"][0]
    assert (d["n_new"], d["n_already"], d["n_conflicts"]) == (2, 1, 1)
    before = one["questions"]["label"]["cumulative"]["spa"]["value"]
    assert before == pytest.approx(0.5)
    assert third["questions"]["label"]["cumulative"]["spa"]["n_items"] == 3


def test_invalid_rows_are_counted_not_merged(tmp_path):
    cfg = monitor_config_from_dict(
        make_config(tmp_path, question={"name": "label", "categories": ["x", "y"]})
    )
    frame = pd.DataFrame(
        {
            "item_id": ["1", "1", None, "2", "2"],
            "rater_id": ["a", "b", "c", "a", "b"],
            "label": ["x", "x", "x", "z", "x"],
            "pool": ["crowd", "crowd", "crowd", "crowd", "elsewhere"],
        }
    )
    deliver(tmp_path, "d.csv", frame)
    out = Monitor(cfg).run_pass(send_alerts=False)
    assert out["deliveries"][0]["n_invalid"] == 3 and out["n_new"] == 2


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="ordinal"):
        monitor_config_from_dict(make_config(tmp_path, question={"name": "g", "level": "ordinal"}))
    with pytest.raises(ConfigError, match="monitor.window"):
        monitor_config_from_dict(make_config(tmp_path, window={"hours": 1, "annotations": 10}))
    with pytest.raises(ConfigError, match="timestamp"):
        monitor_config_from_dict(make_config(tmp_path, source={"kind": "parquet", "path": "x"}))
    with pytest.raises(ConfigError, match="unknown key"):
        monitor_config_from_dict(make_config(tmp_path, windw={"hours": 1}))


def test_example_config_loads():
    cfg = load_monitor_config(Path(__file__).resolve().parents[2] / "configs" / "monitor.example.yaml")
    assert cfg.monitor.window.kind in ("hours", "annotations")


def stamped(n_items: int, seed: int, start: str = "2026-01-05") -> pd.DataFrame:
    from labelgate.pipeline.synth import Scenario, simulate

    data = simulate(
        Scenario(n_items=n_items, start=pd.Timestamp(start, tz="UTC").to_pydatetime(), duration_hours=12),
        seed=seed,
    )
    data["timestamp"] = pd.to_datetime(data["timestamp"]).dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return data


def test_parquet_dataset_source_reads_since_the_watermark(tmp_path):
    data = stamped(300, 1)
    folder = tmp_path / "dataset"
    folder.mkdir()
    ordered = data.sort_values("timestamp")
    half = len(ordered) // 2
    ordered.iloc[:half].to_parquet(folder / "part-0.parquet", index=False)
    cfg = monitor_config_from_dict(
        {
            "store": {"url": f"sqlite:///{tmp_path / 'r.db'}"},
            "columns": {"timestamp": "timestamp"},
            "monitor": {"source": {"kind": "parquet", "path": str(folder)}},
        }
    )
    one = Monitor(cfg).run_pass(send_alerts=False)
    assert one["n_new"] == half
    ordered.iloc[half:].to_parquet(folder / "part-1.parquet", index=False)
    two = Monitor(cfg).run_pass(send_alerts=False)
    assert two["n_new"] == len(ordered) - half
    assert Monitor(cfg).run_pass(send_alerts=False)["n_new"] == 0


def test_sql_table_source_reads_since_the_watermark(tmp_path, monkeypatch):
    data = stamped(200, 2).sort_values("timestamp")
    db = tmp_path / "annotations.db"
    half = len(data) // 2
    with sqlite3.connect(db) as conn:
        data.iloc[:half].assign(
            timestamp=pd.to_datetime(data["timestamp"].iloc[:half]).dt.strftime("%Y-%m-%d %H:%M:%S.%f")
        ).to_sql("judgements", conn, index=False)
    monkeypatch.setenv("LG_TEST_ANNOTATIONS_DB", f"sqlite:///{db}")
    cfg = monitor_config_from_dict(
        {
            "store": {"url": f"sqlite:///{tmp_path / 'r.db'}"},
            "columns": {"timestamp": "timestamp"},
            "monitor": {
                "source": {"kind": "sql", "table": "judgements", "url_env": "LG_TEST_ANNOTATIONS_DB"}
            },
        }
    )
    assert Monitor(cfg).run_pass(send_alerts=False)["n_new"] == half
    with sqlite3.connect(db) as conn:
        rest = data.iloc[half:]
        rest.assign(timestamp=pd.to_datetime(rest["timestamp"]).dt.strftime("%Y-%m-%d %H:%M:%S.%f")).to_sql(
            "judgements", conn, index=False, if_exists="append"
        )
    second = Monitor(cfg).run_pass(send_alerts=False)
    assert second["n_new"] == len(data) - half
    assert Monitor(cfg).run_pass(send_alerts=False)["n_new"] == 0


def test_time_windows_history_and_cli(tmp_path):
    data = stamped(600, 3)
    cfg_dict = make_config(
        tmp_path, window={"hours": 2}, n_boot=100, extra={"columns": {"timestamp": "timestamp"}}
    )
    first = data[data["timestamp"] < "2026-01-05T06"]
    deliver(tmp_path, "a.csv", first)
    deliver(tmp_path, "b.csv", data.drop(first.index))
    path = tmp_path / "monitor.yaml"
    path.write_text(json.dumps(cfg_dict), encoding="utf-8")  # JSON is YAML
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    result = runner.invoke(app, ["monitor", "--config", str(path), "--no-prefect", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["n_new"] == len(data) and summary["questions"]["label"]["windows"] == 5
    # five windows: the change detectors are still learning their reference, and the pass says so
    learning = summary["questions"]["label"]["learning"]
    assert [(n["metric"], n["reference_windows"]) for n in learning] == [("irr_crowd", 5), ("cross_kappa", 5)]
    quiet = runner.invoke(app, ["monitor", "--config", str(path), "--no-prefect"])  # nothing new: still learning
    assert quiet.exit_code == 0 and "irr_crowd: change detector still learning its reference (5 of" in quiet.output
    # the 80 is said to be fixed, and the key that sets when alarms start is named with its value
    assert f"(5 of {cusum.LEARNING_WINDOWS} windows, the fixed length" in quiet.output
    start = cfg_reference_windows(path)
    assert f"alarms from {start} windows on (monitor.drift.change.reference_windows)" in quiet.output
    out = history(path)
    windows = [w for w in out["windows"] if w["scope"] == "window" and w["metric"] == "spa"]
    assert [w["window_start"][11:16] for w in windows] == ["00:00", "02:00", "04:00", "06:00", "08:00"]
    assert all(w["n_items"] > 0 and w["ci_low"] <= w["value"] <= w["ci_high"] for w in windows)
    assert set(out["windows"][0]) == {
        "question",
        "metric",
        "window_start",
        "window_end",
        "scope",
        "value",
        "ci_low",
        "ci_high",
        "n_items",
        "n_ratings",
        "threshold",
    }
    text = runner.invoke(app, ["history", "--config", str(path)])
    assert text.exit_code == 0 and "spa" in text.output and "cumulative" in text.output
    as_json = json.loads(
        runner.invoke(
            app, ["history", "--config", str(path), "--json", "--since", "2026-01-05T05:00:00Z"]
        ).output
    )
    assert min(w["window_end"] for w in as_json["windows"]) >= "2026-01-05T05:00"
    assert {r["pool"] for r in as_json["raters"]} == {"crowd", "trusted"}
    # replay measures the same windows again, with the same numbers
    again = Monitor(load_monitor_config(path)).run_pass(replay=True, send_alerts=False)
    assert again["questions"]["label"]["windows"] == 5
    replayed = [w for w in history(path)["windows"] if w["scope"] == "window" and w["metric"] == "spa"]
    assert [w["value"] for w in replayed] == [w["value"] for w in windows]
    bad = runner.invoke(app, ["monitor", "--config", str(tmp_path / "missing.yaml"), "--no-prefect"])
    assert bad.exit_code == 3 and "error" in bad.output


def test_count_windows(tmp_path):
    data = stamped(400, 5)
    cfg = monitor_config_from_dict(
        make_config(
            tmp_path, window={"annotations": 300}, n_boot=50, extra={"columns": {"timestamp": "timestamp"}}
        )
    )
    deliver(tmp_path, "a.csv", data)
    out = Monitor(cfg).run_pass(send_alerts=False)
    n_crowd = int((data["pool"] == "crowd").sum())
    assert out["questions"]["label"]["windows"] == n_crowd // 300
    rows = [w for w in history(cfg)["windows"] if w["scope"] == "window" and w["metric"] == "spa"]
    assert all(w["n_ratings"] <= 300 for w in rows)


def cfg_reference_windows(path) -> int:
    """``monitor.drift.change.reference_windows`` of a configuration file."""
    return load_monitor_config(path).monitor.drift.change.reference_windows
