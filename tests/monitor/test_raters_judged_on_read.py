"""The monitor judges every rater of a pool when its stored rows are read (labelgate.monitor.rater_rows): the same
flags, judgements and workloads as :func:`labelgate.metrics.diagnostics.rater_diagnostics` on the whole pool at once."""

from __future__ import annotations

import labelgate as lg
from labelgate.metrics.diagnostics import rater_diagnostics
from labelgate.pipeline.synth import PoolSpec, Scenario, simulate


def test_the_monitor_judges_every_rater_of_the_pool_when_its_rows_are_read(tmp_path):
    # two passes: the second touches only some raters, yet the flags are those of the whole pool at once
    from labelgate.cli.monitor import history_text
    from labelgate.monitor import Monitor, history, monitor_config_from_dict
    from labelgate.monitor.rater_rows import judge_stored

    crowd = PoolSpec("crowd", n_raters=40, ratings_per_item=(2, 3), noise=0.2, spammers=0.2)
    trusted = PoolSpec("trusted", n_raters=6, ratings_per_item=(2, 2), noise=0.1)
    df = simulate(Scenario(n_items=1500, pools=(crowd, trusted)), seed=3).drop(columns=["timestamp"])
    late = (df["item_id"] >= "item-000750") & (df["pool"] == "crowd") & (df["rater_id"] >= "crowd-r0020")
    df = df[~late]  # the second delivery touches half of the crowd raters only
    (tmp_path / "drop").mkdir()
    cfg = monitor_config_from_dict({"store": {"url": f"sqlite:///{tmp_path / 'r.db'}"},
                                    "questions": [{"name": "label"}],
                                    "monitor": {"source": {"path": str(tmp_path / "drop")},
                                                "raters": {"fdr": 0.05}}})
    half = df["item_id"] < "item-000750"
    for k, part in enumerate((df[half], df[~half])):
        part.to_csv(tmp_path / "drop" / f"d{k}.csv", index=False)
        Monitor(cfg).run_pass(send_alerts=False)
    rows = [r for r in history(cfg)["raters"] if r["pool"] == "crowd"]
    pools = lg.ratings_by_pool(df)
    batch = {r["rater_id"]: r for r in rater_diagnostics(pools["crowd"], pools["trusted"], fdr=0.05)}
    assert len(rows) == 40 and any("low_agreement" in r["flags"] for r in rows)
    for r in rows:
        want = batch[r["rater_id"]]
        assert (r["flags"], r["judged"], r["needs_items"]) == (want["flags"], want["judged"], want["needs_items"])
    # stored rows carry no judgement of their own; reading judges them (twice: the same)
    assert judge_stored(rows, cfg.monitor.raters) == rows
    text = history_text(history(cfg))
    waiting = {r["rater_id"] for r in rows if not r["judged"]}
    assert 0 < len(waiting) < 40
    assert f"raters [label] crowd: {len(waiting)} of 40 raters have too few items to judge" in text
