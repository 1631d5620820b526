"""The expansion of span and box rows into unit judgements (labelgate.pipeline.units) beside other questions' rows:
what it keeps, what it adds, the time it gives each unit, and the items a write-back addresses."""

from __future__ import annotations

import pandas as pd

import labelgate as lg
from labelgate.pipeline import units
from labelgate.pipeline.config import GateConfig
from tests.gate import drawn


def _mixed(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    spans = drawn.spans(n_docs=4, seed=seed).assign(question="ner")
    tone = pd.DataFrame({"item_id": ["d0", "d0", "d1", "d1"], "rater_id": ["c1", "t1", "c1", "t1"],
                         "label": ["pos", "pos", "neg", "pos"], "pool": ["crowd", "trusted"] * 2,
                         "question": "tone"})
    both = pd.concat([spans, tone], ignore_index=True)
    return both[both["pool"] == "crowd"], both[both["pool"] == "trusted"]


CONFIG = GateConfig.model_validate({"columns": {"question": "question"},
                                    "questions": [{"name": "ner", "kind": "spans", "categories": ["PER", "LOC", "ORG"]},
                                                  {"name": "tone"}]})


def test_other_questions_rows_are_kept_and_the_spans_become_units() -> None:
    crowd, trusted = _mixed(seed=1)
    config, crowd_units, trusted_units, info = units.expand(CONFIG, crowd, trusted)
    for before, after in ((crowd, crowd_units), (trusted, trusted_units)):
        tone = after[after["question"] == "tone"]
        assert tone[["item_id", "rater_id", "label"]].values.tolist() == \
            before.loc[before["question"] == "tone", ["item_id", "rater_id", "label"]].values.tolist()
    ner = pd.concat([crowd_units, trusted_units])
    ner = ner[ner["question"] == "ner"]
    spans = pd.concat([crowd, trusted])
    spans = spans[spans["question"] == "ner"]
    # one judgement per position of each text per rater who annotated it
    per_text = spans.groupby("item_id")["rater_id"].nunique() * 120
    assert len(ner) == per_text.sum() and info["ner"]["units"] == 4 * 120
    expected = lg.Ratings.from_spans(spans.assign(rater_id=spans["pool"] + "/" + spans["rater_id"]))
    assert len(ner) == expected.n_ratings
    assert set(ner["label"].astype(str)) <= {"PER", "LOC", "ORG", "O"}
    assert config.questions[0].categories == ["PER", "LOC", "ORG", "O"] and config.questions[1] == CONFIG.questions[1]
    # a write-back addresses the texts, and the other question's items as they are
    assert set(units.source_items(config, crowd_units)) == set(crowd["item_id"])


def test_each_unit_judgement_carries_its_raters_latest_time() -> None:
    config = GateConfig.model_validate({"columns": {"timestamp": "ts"}, "questions": [{"name": "ner", "kind": "spans"}]})
    frame = drawn.spans(n_docs=2, seed=2)
    frame["ts"] = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(range(len(frame)), unit="min")
    out, _ = units.question_units(config, config.questions[0], frame)
    latest = frame.groupby(["item_id", "rater_id"])["ts"].max()
    got = out.assign(item=out["item_id"].astype(str).str.rpartition("#")[0]).groupby(
        ["item", "rater_id"], observed=True)["ts"].agg(["min", "max"])
    assert (got["min"] == got["max"]).all()  # one time per rater and text
    assert got["max"].to_dict() == {key: value for key, value in latest.items()}
