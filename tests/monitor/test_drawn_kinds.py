"""The monitor on text spans: deliveries of span rows are followed per position, as the gate measures them (label
sets: tests/monitor/test_sets.py; boxes: tests/monitor/test_boxes.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import labelgate as lg
from labelgate.monitor import Monitor, monitor_config_from_dict
from tests.gate import drawn


def _config(root: Path, question: dict) -> dict:
    return {"store": {"url": f"sqlite:///{root / 'results.db'}"}, "questions": [question],
            "monitor": {"source": {"path": str(root / "drop")}, "n_boot": 50}}


def test_span_deliveries_are_followed_per_position(tmp_path: Path):
    frame = drawn.spans(n_docs=12, seed=7)
    (tmp_path / "drop").mkdir()
    crowd, trusted = frame[frame["pool"] == "crowd"], frame[frame["pool"] == "trusted"]
    docs = sorted(crowd["item_id"].unique())
    crowd[crowd["item_id"].isin(docs[:6])].to_csv(tmp_path / "drop" / "a.csv", index=False)
    crowd[~crowd["item_id"].isin(docs[:6])].to_csv(tmp_path / "drop" / "b.csv", index=False)
    trusted.to_csv(tmp_path / "drop" / "t.csv", index=False)
    cfg = monitor_config_from_dict(_config(tmp_path, {"name": "ner", "kind": "spans"}))
    result = Monitor(cfg).run_pass(send_alerts=False)["questions"]["ner"]["cumulative"]
    spans = {"item": "item_id", "rater": "rater_id", "start": "start", "end": "end", "label": "label",
             "length": "length"}
    x, y = lg.Ratings.from_spans(crowd, **spans), lg.Ratings.from_spans(trusted, **spans)
    assert result["irr_crowd"]["value"] == pytest.approx(lg.krippendorff_alpha(x).value, abs=1e-9)
    assert result["irr_trusted"]["value"] == pytest.approx(lg.krippendorff_alpha(y).value, abs=1e-9)
    expected = lg.cross_kappa(x, y).value
    assert np.isfinite(expected)
    assert result["cross_kappa"]["value"] == pytest.approx(expected, abs=1e-9)


def test_spans_from_a_label_studio_project_are_accepted_by_the_configuration(tmp_path: Path):
    # followed end to end on a real server: tests/services/test_label_studio_monitor_regions.py
    config = _config(tmp_path, {"name": "ner", "kind": "spans"})
    config["monitor"]["source"] = {"kind": "label_studio", "url_env": "LS_URL", "project": 3, "control": "label"}
    assert monitor_config_from_dict(config).questions[0].kind == "spans"


def test_listed_span_labels_take_the_outside_label(tmp_path: Path):
    # the gate adds "O" to a span question's listed categories (pipeline.units.unit_config); so does the stream
    frame = drawn.spans(n_docs=6, seed=9)
    (tmp_path / "drop").mkdir()
    frame.to_csv(tmp_path / "drop" / "a.csv", index=False)
    cfg = monitor_config_from_dict(_config(tmp_path, {"name": "ner", "kind": "spans",
                                                      "categories": ["PER", "LOC", "ORG"]}))
    result = Monitor(cfg).run_pass(send_alerts=False)
    assert result["deliveries"][0]["n_invalid"] == 0 and result["questions"]["ner"]["categories"][-1] == "O"
    spans = {"item": "item_id", "rater": "rater_id", "start": "start", "end": "end", "label": "label",
             "length": "length"}
    x = lg.Ratings.from_spans(frame[frame["pool"] == "crowd"], **spans)
    cumulative = result["questions"]["ner"]["cumulative"]
    assert cumulative["irr_crowd"]["value"] == pytest.approx(lg.krippendorff_alpha(x).value, abs=1e-9)
