"""Restated images of a box question (what the Label Studio source delivers): a restated image's stored boxes, every
rater's, are replaced by the delivery's rows of it and the image is regrouped, so a box moved, a rater's boxes gone, an
annotation emptied or every annotation of an image deleted leave the stream with the gate's objects; no box or unit of
another image (item ids sharing a prefix or holding ``#``) is touched. On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from sqlalchemy import func, select

from labelgate.monitor import Monitor, monitor_config_from_dict
from labelgate.pipeline.sources.deliveries import Delivery, restatement
from labelgate.pipeline.sources.tables import content_hash
from labelgate.pipeline.tables import boxes_table
from tests.monitor.test_boxes import boxes, close, gate_pools, metrics
from tests.monitor.test_span_restatements import ITEMS, store  # noqa: F401 (fixture)


def check(summary: dict, cfg, rows: pd.DataFrame) -> None:
    _, pools = gate_pools(cfg, rows)
    cumulative = summary["questions"]["objects"]["cumulative"]
    for metric, expected in metrics(pools).items():
        close(cumulative[metric]["value"], expected, metric)


def stored_boxes(monitor: Monitor) -> dict[str, int]:
    b = boxes_table
    with monitor.engine.connect() as conn:
        return {item: int(n) for item, n in conn.execute(select(b.c.item_id, func.count()).group_by(b.c.item_id))}


def test_a_restated_image_restates_its_boxes_and_no_other(tmp_path: Path, store: str):  # noqa: F811
    cfg = monitor_config_from_dict({"store": {"url_env": store}, "columns": {"timestamp": "timestamp"},
                                    "questions": [{"name": "objects", "kind": "boxes"}],
                                    "monitor": {"source": {"path": str(tmp_path / "drop")}, "n_boot": 20}})
    monitor = Monitor(cfg)
    rows = boxes(23, n_images=len(ITEMS)).assign(timestamp="2026-01-05T00:00:00Z")
    rows["item_id"] = rows["item_id"].map({f"img{k}": item for k, item in enumerate(ITEMS)})
    first = monitor.merge([restatement("all", rows, ITEMS)])
    check(first, cfg, rows)
    before = stored_boxes(monitor)
    assert before == rows.groupby("item_id").size().to_dict()

    # image "1": t1's first box moved off its object, t0's annotation emptied (drew nothing), a crowd rater's boxes
    # gone; image "1#2": every annotation deleted (a restated image with no row left)
    one = rows[rows["item_id"] == "1"]
    gone = one.loc[one["pool"] == "crowd", "rater_id"].iloc[0]
    moved = one.index[(one["rater_id"] == "t1") & one["x"].notna()][0]
    current = rows.drop(index=one.index[(one["rater_id"].isin(["t0", gone]))]).copy()
    current = current.loc[current["item_id"] != "1#2"]
    current.loc[moved, "x"] += 30.0
    empty = one.iloc[:1].assign(rater_id="t0", pool="trusted", x=float("nan"), y=float("nan"), width=float("nan"),
                                height=float("nan"), label=None)
    current = pd.concat([current, empty])
    changed = current[current["item_id"].isin(["1", "1#2"])]
    second = monitor.merge([restatement("change", changed, ["1", "1#2"])])
    question = second["questions"]["objects"]
    assert question["n_replaced"] > 0 and question["n_removed"] > 0
    check(second, cfg, current)
    after = stored_boxes(monitor)
    assert after == {**{k: v for k, v in before.items() if k != "1#2"}, "1": int((current["item_id"] == "1").sum())}

    again = monitor.merge([restatement("same", changed, ["1", "1#2"])])
    question = again["questions"]["objects"]
    assert (again["n_new"], question["n_replaced"], question["n_removed"]) == (0, 0, 0)
    assert question["n_already"] > 0  # every unit of image "1" restated unchanged
    check(again, cfg, current)


def test_a_restatement_states_its_image_over_plain_rows_of_it_in_the_same_pass(tmp_path: Path, store: str):  # noqa: F811
    # one monitor's deliveries come from one source, so this mix does not arise in practice; its rule is still one:
    # the restating delivery states the image, the other delivery's rows of it are counted against it and dropped
    cfg = monitor_config_from_dict({"store": {"url_env": store}, "columns": {"timestamp": "timestamp"},
                                    "questions": [{"name": "objects", "kind": "boxes"}],
                                    "monitor": {"source": {"path": str(tmp_path / "drop")}, "n_boot": 20}})
    monitor = Monitor(cfg)
    rows = boxes(29, n_images=3).assign(timestamp="2026-01-05T00:00:00Z")
    stated = rows[rows["item_id"] == "img0"]
    changed = stated.assign(x=stated["x"] + 0.5)  # every box of img0 a little off: the plain rows disagree
    plain = Delivery("plain.csv", pd.concat([changed, rows[rows["item_id"] != "img0"]]), content_hash(rows),
                     arrived_at=0)
    summary = monitor.merge([plain, restatement("img0", stated, ["img0"])])
    check(summary, cfg, rows)
    drew = changed["x"].notna()  # a rater's rows of an image are all boxes, or one empty row (the same when moved)
    assert (summary["deliveries"][0]["n_conflicts"], summary["deliveries"][0]["n_already"]) == (int(drew.sum()),
                                                                                                int((~drew).sum()))
    assert summary["deliveries"][0]["n_conflicts"] > 0
    assert stored_boxes(monitor) == rows.groupby("item_id").size().to_dict()
