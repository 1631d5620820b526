"""The monitor on text spans: deliveries of span rows are followed per position, as the gate measures them; boxes are
refused by the configuration with the reason (label sets: tests/monitor/test_sets.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import labelgate as lg
from labelgate.monitor import Monitor, monitor_config_from_dict
from labelgate.pipeline.config import ConfigError
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


def test_boxes_are_refused_with_the_reason(tmp_path: Path):
    with pytest.raises(ConfigError, match="kind: boxes") as caught:
        monitor_config_from_dict(_config(tmp_path, {"name": "objects", "kind": "boxes"}))
    assert "questions[0]" in str(caught.value) and "labelgate gate" in str(caught.value)


def test_spans_from_a_label_studio_project_are_accepted_by_the_configuration(tmp_path: Path):
    # followed end to end on a real server: tests/services/test_label_studio_monitor_regions.py
    config = _config(tmp_path, {"name": "ner", "kind": "spans"})
    config["monitor"]["source"] = {"kind": "label_studio", "url_env": "LS_URL", "project": 3, "control": "label"}
    assert monitor_config_from_dict(config).questions[0].kind == "spans"
