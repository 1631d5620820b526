"""The monitor's IRR with agreement weights (``monitor.weights``): every cumulative value and every window equals the
core's weighted coefficient on the same judgements, through the configuration, the CLI and the stored series."""

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
from labelgate.errors import InputError
from labelgate.monitor import Monitor, monitor_config_from_dict
from labelgate.pipeline.config import ConfigError
from tests.monitor.test_incremental import defined_value

IRR = {"krippendorff_alpha": lg.krippendorff_alpha, "fleiss_kappa": lg.fleiss_kappa, "gwet_ac": lg.gwet_ac}
ORDINAL = [1, 2, 3, 4, 5]
INTERVAL = [0.5, 1.0, 2.5, 4.0, 6.0]
#: An asymmetric custom matrix (unit diagonal, credits in [0, 1]): the IRRs use its symmetric part.
MATRIX = [[1.0, 0.8, 0.3, 0.0, 0.0], [0.6, 1.0, 0.5, 0.2, 0.0], [0.3, 0.5, 1.0, 0.5, 0.1],
          [0.0, 0.2, 0.5, 1.0, 0.7], [0.0, 0.0, 0.1, 0.7, 1.0]]
WINDOW = 60


def judgements(seed: int, categories: list, n_items: int = 60) -> pd.DataFrame:
    """Crowd (3 or 4 ratings per item, some items single-rated) and trusted (2) judgements near a true level."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, len(categories), size=n_items)
    rows = []
    for i in range(n_items):
        for pool, raters in (("trusted", ["t0", "t1"]), ("crowd", [f"c{k}" for k in range(int(rng.integers(1, 5)))])):
            for rater in raters:
                code = int(np.clip(truth[i] + rng.integers(-1, 2), 0, len(categories) - 1))
                rows.append({"item_id": f"i{i}", "rater_id": rater, "label": categories[code], "pool": pool})
    frame = pd.DataFrame(rows)
    return pd.concat([frame[frame["pool"] == "trusted"], frame[frame["pool"] == "crowd"]], ignore_index=True)


def config(root: Path, level: str, categories: list, irr: str, weights) -> dict:
    return {"store": {"url": f"sqlite:///{root / 'results.db'}"},
            "questions": [{"name": "label", "level": level, "categories": categories}],
            "monitor": {"source": {"path": str(root / "drop")}, "irr": irr, "weights": weights, "n_boot": 20,
                        "window": {"annotations": WINDOW}}}


def core(frame: pd.DataFrame, level: str, categories: list, irr: str, weights) -> dict[str, float | None]:
    """The core's values on ``frame``: the weighted IRRs and normalized kappa_x, kappa_x with the level's distance."""
    pools = lg.ratings_by_pool(frame, level=level, categories=categories)
    crowd, trusted = pools.get("crowd"), pools.get("trusted")

    both = crowd is not None and trusted is not None
    return {"irr_crowd": defined_value(IRR[irr], crowd, weights=weights),
            "irr_trusted": defined_value(IRR[irr], trusted, weights=weights) if trusted is not None else None,
            "cross_kappa": defined_value(lg.cross_kappa, crowd, trusted) if both else None,
            "normalized_cross_kappa": defined_value(lg.normalized_cross_kappa, crowd, trusted, irr=irr,
                                            weights=weights) if both else None,
            "spa": defined_value(lg.spa, crowd)}


def stored_windows(root: Path) -> list[dict]:
    """The stored window rows (with their index, which the history does not show)."""
    with sqlite3.connect(root / "results.db") as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("select * from labelgate_monitor_windows where scope = 'window'").fetchall()
    return [dict(row) for row in rows]


def close(got: float | None, expected: float | None, what: str) -> None:
    if expected is None:
        assert got is None, f"{what}: expected undefined, got {got}"
    else:
        assert got is not None and got == pytest.approx(expected, rel=1e-9, abs=1e-9), f"{what}: {got} != {expected}"


CASES = [
    *[("ordinal", ORDINAL, "krippendorff_alpha", w) for w in
      ("identity", "linear", "quadratic", "ordinal", "radical", "ratio", "circular", "bipolar", MATRIX)],
    ("ordinal", ORDINAL, "fleiss_kappa", "linear"),
    ("ordinal", ORDINAL, "fleiss_kappa", MATRIX),
    ("ordinal", ORDINAL, "gwet_ac", "quadratic"),
    ("ordinal", ORDINAL, "gwet_ac", MATRIX),
    ("interval", INTERVAL, "krippendorff_alpha", "linear"),
    ("interval", INTERVAL, "krippendorff_alpha", "identity"),
    ("interval", INTERVAL, "gwet_ac", "ratio"),
    ("nominal", ["a", "b", "c", "d", "e"], "fleiss_kappa", MATRIX),
]


@pytest.mark.parametrize(("level", "categories", "irr", "weights"), CASES,
                         ids=[f"{c[0]}-{c[2]}-{c[3] if isinstance(c[3], str) else 'matrix'}" for c in CASES])
def test_weighted_windows_and_cumulative_equal_the_core(tmp_path: Path, level, categories, irr, weights):
    data = judgements(11, categories)
    cfg = monitor_config_from_dict(config(tmp_path, level, categories, irr, weights))
    (tmp_path / "drop").mkdir()
    cuts = [0, 200, 330, len(data)]  # three passes: the first holds every trusted judgement
    for k in range(3):
        data.iloc[cuts[k]:cuts[k + 1]].to_csv(tmp_path / "drop" / f"d{k}.csv", index=False)
        summary = Monitor(cfg).run_pass(send_alerts=False)
        cumulative = summary["questions"]["label"]["cumulative"]
        expected = core(data.iloc[: cuts[k + 1]], level, categories, irr, weights)
        for metric, value in expected.items():
            close(cumulative[metric]["value"], value, f"pass {k} cumulative {metric}")
    # every window: its crowd judgements (merge order = row order, one delivery per pass) and all trusted ones
    crowd, trusted = data[data["pool"] == "crowd"], data[data["pool"] == "trusted"]
    stored = stored_windows(tmp_path)
    n_windows = len(crowd) // WINDOW
    assert {w["window_index"] for w in stored} == set(range(n_windows))
    for w in stored:
        rows = crowd.iloc[w["window_index"] * WINDOW:(w["window_index"] + 1) * WINDOW]
        mine = pd.concat([rows, trusted[trusted["item_id"].isin(rows["item_id"])]], ignore_index=True)
        close(w["value"], core(mine, level, categories, irr, weights)[w["metric"]],
              f"window {w['window_index']} {w['metric']}")
    assert sum(w["value"] is not None for w in stored if w["metric"] == "irr_crowd") >= 2  # windows with a value


def test_weights_through_the_cli(tmp_path: Path):
    data = judgements(3, ORDINAL)
    (tmp_path / "drop").mkdir()
    data.to_csv(tmp_path / "drop" / "d.csv", index=False)
    path = tmp_path / "monitor.yaml"
    path.write_text(json.dumps(config(tmp_path, "ordinal", ORDINAL, "gwet_ac", "quadratic")), encoding="utf-8")
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["monitor", "--config", str(path), "--no-prefect", "--json"])
    assert result.exit_code == 0, result.output
    cumulative = json.loads(result.output)["questions"]["label"]["cumulative"]
    pools = lg.ratings_by_pool(data, level="ordinal", categories=ORDINAL)
    expected = lg.gwet_ac(pools["crowd"], weights="quadratic").value
    assert expected != pytest.approx(lg.gwet_ac(pools["crowd"]).value, abs=1e-3)  # the weights make a difference
    assert cumulative["irr_crowd"]["value"] == pytest.approx(expected, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(("question", "weights", "words"), [
    ({"name": "label", "level": "ordinal", "categories": ORDINAL}, "cubic", "unknown weighting 'cubic'"),
    ({"name": "label"}, "linear", "needs questions\\[0\\] \\('label'\\) to list its 'categories'"),
    ({"name": "label", "level": "ordinal", "categories": [1, 2, 3]}, MATRIX, "5 x 5 matrix; .* has 3 categories"),
    ({"name": "label", "categories": ["a", "b"]}, [[1.0, 0.5], [0.5, 0.9]], "must have 1 on its diagonal"),
    ({"name": "label", "categories": ["a", "b"]}, [[1.0, 1.5], [0.5, 1.0]], "every credit in \\[0, 1\\]"),
    ({"name": "label", "categories": ["a", "b"]}, [[1.0, 0.5]], "must be square"),
    ({"name": "ner", "kind": "spans", "categories": ["PER"]}, "linear", "nominal units"),
    ({"name": "topics", "level": "set", "distance": "jaccard", "categories": ["a"]}, "linear",
     "1 - the set distance"),
])
def test_weights_the_monitor_cannot_take_are_refused_naming_the_key(tmp_path: Path, question, weights, words):
    cfg = config(tmp_path, "nominal", [], "krippendorff_alpha", weights)
    cfg["questions"] = [question]
    with pytest.raises(ConfigError, match=words) as caught:
        monitor_config_from_dict(cfg)
    assert "monitor" in str(caught.value)


def test_identity_weights_need_no_categories(tmp_path: Path):
    cfg = config(tmp_path, "nominal", None, "fleiss_kappa", "identity")
    assert monitor_config_from_dict(cfg).monitor.weights == "identity"


def test_changed_weights_are_refused_on_a_stream_with_sums(tmp_path: Path):
    (tmp_path / "drop").mkdir()
    judgements(5, ORDINAL).to_csv(tmp_path / "drop" / "d.csv", index=False)
    Monitor(monitor_config_from_dict(config(tmp_path, "ordinal", ORDINAL, "krippendorff_alpha", "linear"))).run_pass(
        send_alerts=False)
    changed = Monitor(monitor_config_from_dict(config(tmp_path, "ordinal", ORDINAL, "krippendorff_alpha",
                                                      "quadratic")))
    with pytest.raises(InputError, match="weights changed from 'linear' to 'quadratic'"):
        changed.run_pass(send_alerts=False)
