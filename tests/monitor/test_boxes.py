"""The monitor on image boxes (``kind: boxes``): an image is regrouped from all its stored boxes whenever a box of it
arrives, so after every pass each cumulative value, and each window measured in it, equals the gate's on the boxes
merged so far (``labelgate.pipeline.units.expand``: objects grouped over both pools, then the core's metrics)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

import labelgate as lg
from labelgate.cli.monitor import register
from labelgate.monitor import Monitor, monitor_config_from_dict
from labelgate.pipeline.units import expand
from tests.monitor.test_incremental import defined_value

LABELS = ("car", "person", "bike")
HOUR = 3_600_000_000
EPOCH = pd.Timestamp(0, tz="UTC")
METRICS = ("spa", "irr_crowd", "cross_kappa", "normalized_cross_kappa")


def boxes(seed: int, n_images: int = 40) -> pd.DataFrame:
    """Two to three objects per image, side by side; each rater's box jittered (now and then below the IoU
    threshold: a box of its own), missed or mislabelled now and then; a rater who drew nothing has one empty row."""
    rng = np.random.default_rng(seed)
    rows = []
    raters = [("trusted", r) for r in ("t0", "t1")] + [("crowd", f"c{k}") for k in range(5)]
    for image in range(n_images):
        gold = [(5.0 + 30.0 * k, float(rng.uniform(10, 50)), 20.0, 25.0, LABELS[int(rng.integers(0, 3))])
                for k in range(int(rng.integers(2, 4)))]
        for pool, rater in raters:
            if pool == "crowd" and rng.random() < 0.3:
                continue  # this rater did not see the image
            drawn = 0
            for x, y, w, h, label in gold:
                if rng.random() < (0.1 if pool == "trusted" else 0.25):
                    continue
                shift = float(rng.normal(0, 1.5 if rng.random() < 0.8 else 7.0))
                if rng.random() < 0.15:
                    label = LABELS[int(rng.integers(0, 3))]
                rows.append((f"img{image}", rater, max(0.0, x + shift), y, w, h, label, pool))
                drawn += 1
            if not drawn:
                rows.append((f"img{image}", rater, None, None, None, None, None, pool))
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "x", "y", "width", "height", "label", "pool"])


def config(root: Path, window: dict) -> dict:
    return {"store": {"url": f"sqlite:///{root / 'results.db'}"}, "columns": {"timestamp": "timestamp"},
            "questions": [{"name": "objects", "kind": "boxes"}],
            "monitor": {"source": {"path": str(root / "drop")}, "n_boot": 20, "window": window}}


def gate_pools(cfg, rows: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The gate's unit judgements of ``rows`` (both pools grouped at once) and their Ratings per pool."""
    _, crowd, trusted, _ = expand(cfg, rows[rows["pool"] == "crowd"], rows[rows["pool"] == "trusted"])
    units = pd.concat([crowd, trusted], ignore_index=True)
    units = units.astype({c: object for c in ("item_id", "rater_id", "label", "pool")})
    return units, lg.ratings_by_pool(units)


def metrics(pools: dict) -> dict[str, float | None]:
    crowd, trusted = pools.get("crowd"), pools.get("trusted")
    both = crowd is not None and trusted is not None
    return {"spa": defined_value(lg.spa, crowd) if crowd is not None else None,
            "irr_crowd": defined_value(lg.krippendorff_alpha, crowd) if crowd is not None else None,
            "irr_trusted": defined_value(lg.krippendorff_alpha, trusted) if trusted is not None else None,
            "cross_kappa": defined_value(lg.cross_kappa, crowd, trusted) if both else None,
            "normalized_cross_kappa": defined_value(lg.normalized_cross_kappa, crowd, trusted) if both else None}


def close(got, expected, what: str) -> None:
    if expected is None:
        assert got is None, f"{what}: expected undefined, got {got}"
    else:
        assert got is not None and got == pytest.approx(expected, rel=1e-9, abs=1e-9), f"{what}: {got} != {expected}"


def test_regrouped_images_give_the_gates_values_after_every_pass(tmp_path: Path):
    data = boxes(17)
    cfg = monitor_config_from_dict(config(tmp_path, {"hours": 1}))
    (tmp_path / "drop").mkdir()
    # the crowd's first raters, then the trusted pool, then the other raters: later boxes regroup earlier objects
    waves = [data[data["rater_id"].isin(["c0", "c1"])], data[data["pool"] == "trusted"],
             data[data["rater_id"].isin(["c2", "c3"])], data[data["rater_id"] == "c4"]]
    merged, measured, moved = [], {}, 0
    for k, wave in enumerate(waves):
        stamps = pd.to_datetime(2 * k * HOUR + np.arange(len(wave)) * 1000, unit="us", utc=True)
        wave = wave.assign(timestamp=stamps.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        wave.to_csv(tmp_path / "drop" / f"d{k}.csv", index=False)
        merged.append(wave)
        question = Monitor(cfg).run_pass(send_alerts=False)["questions"]["objects"]
        moved += question.get("n_replaced", 0) + question.get("n_removed", 0)
        so_far = pd.concat(merged, ignore_index=True)
        units, pools = gate_pools(cfg, so_far)
        for metric, expected in metrics(pools).items():
            close(question["cumulative"][metric]["value"] if question["cumulative"] else None, expected,
                  f"pass {k} cumulative {metric}")
        for row in stored_windows(tmp_path):  # the windows this pass measured: the gate's units known now
            if row["window_index"] in measured:
                continue
            measured[row["window_index"]] = True
            start, end = row["window_index"] * HOUR, (row["window_index"] + 1) * HOUR
            times = (pd.to_datetime(units["timestamp"], utc=True) - EPOCH) // pd.Timedelta(microseconds=1)
            crowd = units[(units["pool"] == "crowd") & (times >= start) & (times < end)]
            mine = pd.concat([crowd, units[(units["pool"] == "trusted") & units["item_id"].isin(crowd["item_id"])]])
            for metric, expected in metrics(lg.ratings_by_pool(mine)).items():
                if metric in METRICS:
                    close(window_value(tmp_path, row["window_index"], metric), expected,
                          f"window {row['window_index']} {metric}")
    assert moved > 0  # later boxes did change earlier objects
    assert sorted(measured) == [0, 4]  # crowd windows of the first raters (measured with the trusted pool) and c2, c3


def stored_windows(root: Path) -> list[dict]:
    with sqlite3.connect(root / "results.db") as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("select * from labelgate_monitor_windows where scope = 'window'")]


def window_value(root: Path, index: int, metric: str) -> float | None:
    return next(r["value"] for r in stored_windows(root) if r["window_index"] == index and r["metric"] == metric)


def test_redelivered_boxes_are_counted_not_merged_and_the_cli_runs(tmp_path: Path):
    data = boxes(5, n_images=12)
    (tmp_path / "drop").mkdir()
    data.assign(timestamp="2026-01-05T00:00:00Z").to_csv(tmp_path / "drop" / "a.csv", index=False)
    path = tmp_path / "monitor.yaml"
    path.write_text(json.dumps(config(tmp_path, {"annotations": 50})), encoding="utf-8")
    app = typer.Typer()
    register(app)
    first = CliRunner().invoke(app, ["monitor", "--config", str(path), "--no-prefect", "--json"])
    assert first.exit_code == 0, first.output
    cfg = monitor_config_from_dict(json.loads(path.read_text()))
    _, pools = gate_pools(cfg, data.assign(timestamp="2026-01-05T00:00:00Z"))
    cumulative = json.loads(first.output)["questions"]["objects"]["cumulative"]
    for metric, expected in metrics(pools).items():
        close(cumulative[metric]["value"], expected, metric)
    # one rater's boxes of an image again (same boxes), another's with a box moved: counted, nothing merged
    again = data[(data["item_id"] == "img0") & data["rater_id"].isin(["t0", "t1"])].copy()
    again.loc[again["rater_id"] == "t1", "x"] += 1.0
    again.assign(timestamp="2026-01-05T00:00:01Z").to_csv(tmp_path / "drop" / "b.csv", index=False)
    second = Monitor(cfg).run_pass(send_alerts=False)
    delivery = second["deliveries"][0]
    assert delivery["n_new"] == 0
    assert delivery["n_already"] == int((again["rater_id"] == "t0").sum())
    assert delivery["n_conflicts"] == int((again["rater_id"] == "t1").sum())
    for metric, expected in metrics(pools).items():
        close(second["questions"]["objects"]["cumulative"][metric]["value"], expected, metric)


def test_boxes_from_a_label_studio_project_are_accepted_by_the_configuration(tmp_path: Path):
    # followed end to end on a real server: tests/services/test_label_studio_monitor_boxes.py
    cfg = config(tmp_path, {"hours": 1})
    cfg["monitor"]["source"] = {"kind": "label_studio", "url_env": "LS_URL", "project": 3, "control": "box"}
    assert monitor_config_from_dict(cfg).questions[0].kind == "boxes"
