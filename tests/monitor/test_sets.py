"""The monitor on label sets (``level: set``): sets keyed by their canonical form across deliveries, the distance
matrix over the sets seen so far; every cumulative value, window and per-rater row equals the core's on the same
judgements (``Ratings.from_long(level="set", distance=...)``), with empty sets, missing judgements and sets arriving
in CSV text and Parquet lists."""

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
from labelgate.metrics.diagnostics import rater_diagnostics
from labelgate.monitor import Monitor, history, monitor_config_from_dict
from tests.monitor.test_incremental import defined_value

IRR = {"krippendorff_alpha": lg.krippendorff_alpha, "fleiss_kappa": lg.fleiss_kappa, "gwet_ac": lg.gwet_ac}
ELEMENTS = ["arts", "news", "sports", "tech"]
WINDOW = 50


def judgements(seed: int, n_items: int = 60) -> pd.DataFrame:
    """Crowd (up to 4 raters, some judgements missing) and trusted (2) label sets near a true set; about one
    judgement in six is the empty set, some cells are missing (no judgement)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_items):
        truth = set(rng.choice(ELEMENTS, size=int(rng.integers(0, 3)), replace=False).tolist())
        for pool, raters in (("trusted", ["t0", "t1"]), ("crowd", ["c0", "c1", "c2", "c3"])):
            for rater in raters:
                if rng.random() < 0.2:
                    continue  # this rater did not judge the item
                chosen = set(truth)
                if rng.random() < 0.35:
                    chosen ^= {str(rng.choice(ELEMENTS))}
                if pool == "crowd" and i >= n_items * 2 // 3 and rng.random() < 0.3:
                    chosen.add("weather")  # sets first seen in a later delivery: the distance matrix grows
                label = None if rng.random() < 0.04 else sorted(chosen)  # a missing cell: no judgement
                rows.append({"item_id": f"i{i}", "rater_id": rater, "label": label, "pool": pool})
    frame = pd.DataFrame(rows)
    return pd.concat([frame[frame["pool"] == "trusted"], frame[frame["pool"] == "crowd"]], ignore_index=True)


def as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """The sets written as CSV text with ``|`` (the empty set: ``|`` alone, since an empty cell is missing)."""
    return frame.assign(label=[None if v is None else ("|".join(v) if v else "|") for v in frame["label"]])


def config(root: Path, distance: str, irr: str, **question) -> dict:
    return {"store": {"url": f"sqlite:///{root / 'results.db'}"},
            "questions": [{"name": "topics", "level": "set", "distance": distance, "sep": "|", **question}],
            "monitor": {"source": {"path": str(root / "drop")}, "irr": irr, "n_boot": 20,
                        "window": {"annotations": WINDOW}, "raters": {"min_pair_items": 2, "min_shared_items": 2}}}


def pools(frame: pd.DataFrame, distance: str, categories=None) -> dict:
    return lg.ratings_by_pool(frame.loc[frame["label"].notna()], level="set", distance=distance,
                              categories=categories)


def core(frame: pd.DataFrame, distance: str, irr: str, categories=None) -> dict[str, float | None]:
    found = pools(frame, distance, categories)
    crowd, trusted = found.get("crowd"), found.get("trusted")

    both = crowd is not None and trusted is not None
    return {"spa": defined_value(lg.spa, crowd), "irr_crowd": defined_value(IRR[irr], crowd),
            "irr_trusted": defined_value(IRR[irr], trusted) if trusted is not None else None,
            "cross_kappa": defined_value(lg.cross_kappa, crowd, trusted) if both else None,
            "normalized_cross_kappa": defined_value(lg.normalized_cross_kappa, crowd, trusted, irr=irr) if both else None}


def close(got: float | None, expected: float | None, what: str) -> None:
    if expected is None:
        assert got is None, f"{what}: expected undefined, got {got}"
    else:
        assert got is not None and got == pytest.approx(expected, rel=1e-9, abs=1e-9), f"{what}: {got} != {expected}"


def stored_windows(root: Path) -> list[dict]:
    with sqlite3.connect(root / "results.db") as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("select * from labelgate_monitor_windows where scope = 'window'")]


@pytest.mark.parametrize("distance", ["jaccard", "masi"])
@pytest.mark.parametrize("irr", ["krippendorff_alpha", "fleiss_kappa", "gwet_ac"])
def test_set_windows_cumulative_and_raters_equal_the_core(tmp_path: Path, distance: str, irr: str):
    data = judgements(21)
    assert (data["label"].map(lambda v: v == [])).sum() >= 10 and data["label"].isna().sum() >= 3
    cfg = monitor_config_from_dict(config(tmp_path, distance, irr))
    (tmp_path / "drop").mkdir()
    cuts = [0, 140, 260, len(data)]  # the first delivery holds every trusted judgement
    measured_with: dict[int, list[tuple]] = {}
    for k in range(3):
        part = data.iloc[cuts[k]:cuts[k + 1]]
        if k == 1:  # the same sets as CSV text: one canonical key whatever the file's format
            as_text(part).to_csv(tmp_path / "drop" / f"d{k}.csv", index=False)
        else:
            part.to_parquet(tmp_path / "drop" / f"d{k}.parquet")
        result = Monitor(cfg).run_pass(send_alerts=False)["questions"]["topics"]
        seen = [tuple(c) for c in result["categories"]]
        assert len(seen) == len(set(seen))  # each set once, whatever delivery it came in
        assert any("weather" in c for c in seen) == (k > 0)
        # Gwet's AC counts the sets seen (as it counts a stream's categories); the other metrics do not depend on it
        expected = core(data.iloc[:cuts[k + 1]], distance, irr, categories=seen)
        for metric, value in expected.items():
            close(result["cumulative"][metric]["value"], value, f"pass {k} cumulative {metric}")
        for w in stored_windows(tmp_path):  # the sets known when each window was measured
            measured_with.setdefault(w["window_index"], seen)
    crowd, trusted = data[data["pool"] == "crowd"], data[data["pool"] == "trusted"]
    crowd = crowd.loc[crowd["label"].notna()]  # a missing cell is no judgement: it takes no place in the windows
    stored = stored_windows(tmp_path)
    assert {w["window_index"] for w in stored} == set(range(len(crowd) // WINDOW))
    for w in stored:
        rows = crowd.iloc[w["window_index"] * WINDOW:(w["window_index"] + 1) * WINDOW]
        mine = pd.concat([rows, trusted[trusted["item_id"].isin(rows["item_id"])]], ignore_index=True)
        expected = core(mine, distance, irr, categories=measured_with[w["window_index"]] if irr == "gwet_ac" else None)
        close(w["value"], expected[w["metric"]], f"window {w['window_index']} {w['metric']}")
    assert sum(w["value"] is not None for w in stored if w["metric"] == "irr_crowd") >= 2
    # the per-rater rows equal the core's diagnostics on all the judgements (the set distance in their blocks)
    both = pools(data, distance, seen)
    rows = {(r["pool"], r["rater_id"]): r for r in history(cfg)["raters"]}
    for name, pool, ref in (("crowd", both["crowd"], both["trusted"]), ("trusted", both["trusted"], None)):
        for row in rater_diagnostics(pool, ref, pool_name=name, min_pair_items=2, min_shared_items=2):
            got = rows[(name, row["rater_id"])]
            for key in ("kappa_vs_trusted", "loo_agreement", "bias"):
                close(got[key], row[key], f"{name} {row['rater_id']} {key}")
            assert (got["n_ratings"], got["n_shared_items"]) == (row["n_ratings"], row["n_shared_items"])


def test_sets_outside_the_listed_elements_are_invalid(tmp_path: Path):
    (tmp_path / "drop").mkdir()
    frame = pd.DataFrame({"item_id": ["1", "1", "2", "2"], "rater_id": ["a", "b", "a", "b"],
                          "label": ["news|tech", "|", "news|weather", "tech"], "pool": "crowd"})
    frame.to_csv(tmp_path / "drop" / "d.csv", index=False)
    cfg = monitor_config_from_dict(config(tmp_path, "jaccard", "krippendorff_alpha", categories=["news", "tech"]))
    result = Monitor(cfg).run_pass(send_alerts=False)
    assert result["deliveries"][0]["n_invalid"] == 1 and result["n_new"] == 3
    assert sorted(map(tuple, result["questions"]["topics"]["categories"])) == [(), ("news", "tech"), ("tech",)]


def test_sets_through_the_cli_and_a_changed_distance_is_refused(tmp_path: Path):
    (tmp_path / "drop").mkdir()
    data = judgements(4)
    data.to_parquet(tmp_path / "drop" / "d.parquet")
    path = tmp_path / "monitor.yaml"
    path.write_text(json.dumps(config(tmp_path, "masi", "krippendorff_alpha")), encoding="utf-8")
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["monitor", "--config", str(path), "--no-prefect", "--json"])
    assert result.exit_code == 0, result.output
    cumulative = json.loads(result.output)["questions"]["topics"]["cumulative"]
    expected = lg.krippendorff_alpha(pools(data, "masi")["crowd"]).value
    assert cumulative["irr_crowd"]["value"] == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert expected != pytest.approx(lg.krippendorff_alpha(pools(data, "jaccard")["crowd"]).value, abs=1e-4)
    changed = Monitor(monitor_config_from_dict(config(tmp_path, "jaccard", "krippendorff_alpha")))
    with pytest.raises(InputError, match="masi distance and is now configured with jaccard"):
        changed.run_pass(send_alerts=False)
