"""Restated texts of a span question (what the Label Studio source delivers): a restated item restates every stored
unit of it (``item#position``) and no unit of another item, whatever ``#`` the item ids hold; on SQLite and
PostgreSQL (whose language collations would order ``#`` otherwise: the unit ranges are compared under ``C``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
from labelgate.monitor import Monitor, judgements, monitor_config_from_dict
from labelgate.pipeline.sources.deliveries import restatement
from tests.conftest import postgres_database

COLUMNS = ["item_id", "rater_id", "start", "end", "label", "length", "pool"]
SPANS = {"item": "item_id", "rater": "rater_id", "start": "start", "end": "end", "label": "label", "length": "length"}
#: Item ids that share prefixes and hold the unit separator: restating "1" must not touch "12", "1#2" or "1#"
ITEMS = ["1", "12", "1#2", "1#", "2"]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "sqlite":
        monkeypatch.setenv("LG_SPAN_STORE", f"sqlite:///{tmp_path / 'results.db'}")
        yield "LG_SPAN_STORE"
        return
    with postgres_database("labelgate_spans") as url:
        monkeypatch.setenv("LG_SPAN_STORE", url)
        yield "LG_SPAN_STORE"


def spans(seed: int, items: list[str]) -> list[tuple]:
    """Three crowd and two trusted raters on every text of 30 characters, two entities each (shifted now and then)."""
    rng = np.random.default_rng(seed)
    rows = []
    for item in items:
        gold = [(2, 7, "PER"), (15, 22, "LOC")]
        for pool, raters in (("crowd", ["c0", "c1", "c2"]), ("trusted", ["t0", "t1"])):
            for rater in raters:
                for start, end, label in gold:
                    shift = int(rng.integers(-1, 2))
                    rows.append((item, rater, start + shift, end, label if rng.random() < 0.85 else "ORG", 30, pool))
    return rows


def frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS).astype({"start": "Int64", "end": "Int64"})


def expected(rows: list[tuple]) -> dict[str, float]:
    table = frame(rows)
    crowd, trusted = (lg.Ratings.from_spans(table[table["pool"] == p], **SPANS) for p in ("crowd", "trusted"))
    return {"irr_crowd": lg.krippendorff_alpha(crowd).value, "irr_trusted": lg.krippendorff_alpha(trusted).value,
            "cross_kappa": lg.cross_kappa(crowd, trusted).value, "spa": lg.spa(crowd).value}


def check(summary: dict, rows: list[tuple]) -> None:
    cumulative = summary["questions"]["ner"]["cumulative"]
    for metric, value in expected(rows).items():
        assert cumulative[metric]["value"] == pytest.approx(value, rel=1e-9, abs=1e-9), metric


@pytest.mark.parametrize("collated", [False, True], ids=["store-order", "C-collation"])
def test_a_restated_text_restates_every_unit_of_it_and_no_other(tmp_path: Path, store: str, collated: bool,
                                                                 monkeypatch: pytest.MonkeyPatch):
    if collated:  # the ranges as a store with a language collation compares them (COLLATE "C" on PostgreSQL)
        if not os.environ[store].startswith("postgresql"):
            pytest.skip("SQLite orders text bytewise: no collation to override")
        monkeypatch.setattr(judgements, "_bytewise", lambda conn: False)
    cfg = monitor_config_from_dict({"store": {"url_env": store}, "questions": [{"name": "ner", "kind": "spans"}],
                                    "monitor": {"source": {"path": str(tmp_path / "drop")}, "n_boot": 20}})
    monitor = Monitor(cfg)
    rows = spans(3, ITEMS)
    first = monitor.merge([restatement("all", frame(rows), ITEMS)])
    assert first["n_new"] == len(ITEMS) * 5 * 30  # every position of every text, by each of its five raters
    check(first, rows)

    # text "1": c0's annotation deleted, c1's first span relabelled, t0 marked nothing; text "1#2": every annotation
    # deleted (a restated item with no row left)
    current = [r for r in rows if not (r[0] == "1" and r[1] in ("c0", "t0")) and r[0] != "1#2"]
    current = [(*r[:4], "ORG" if r[0] == "1" and r[1] == "c1" and r[2] < 10 else r[4], *r[5:]) for r in current]
    relabelled = next(r for r in current if r[0] == "1" and r[1] == "c1" and r[2] < 10)
    assert relabelled[4] == "ORG"
    current.append(("1", "t0", None, None, None, 30, "trusted"))
    with monitor.engine.connect() as conn:
        before = {item: len(judgements.load_units(conn, 1, [item])) for item in ITEMS}
    assert before == dict.fromkeys(ITEMS, 5 * 30)  # each item's own units, none of the items sharing its prefix
    second = monitor.merge([restatement("change", frame([r for r in current if r[0] in ("1", "1#2")]),
                                        ["1", "1#2"])])
    question = second["questions"]["ner"]
    assert question["n_removed"] == 30 + 5 * 30  # c0's units of "1", every unit of "1#2"
    assert question["n_replaced"] > 0  # c1's relabelled positions, t0's positions turned to O
    check(second, current)
    with monitor.engine.connect() as conn:
        after = {item: len(judgements.load_units(conn, 1, [item])) for item in ITEMS}
    assert after == {**before, "1": 4 * 30, "1#2": 0}
    again = monitor.merge([restatement("same", frame([r for r in current if r[0] == "1"]), ["1"])])
    assert (again["n_new"], again["questions"]["ner"]["n_replaced"], again["questions"]["ner"]["n_removed"]) == (0, 0, 0)
