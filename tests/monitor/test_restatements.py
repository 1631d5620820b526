"""Restatements (the Label Studio source's deliveries): updates replace, deletions remove, and the monitor's statistics
equal the core's on the current judgements — item sums and per-rater rows — after any sequence of changes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labelgate.monitor import Monitor, judgements, monitor_config_from_dict, rater_store
from labelgate.pipeline.sources.deliveries import restatement
from labelgate.pipeline.sources.label_studio_delivery import Hints
from tests.conftest import postgres_database
from tests.monitor.test_incremental import LABELS, assert_close, core_expected, rater_pairs

Source = dict[tuple[int, int], tuple[int, str]]  # (item, rater) -> (label code, pool): one annotation each


def config(root: Path, level: str = "nominal", irr: str = "krippendorff_alpha", url_env: str | None = None,
           min_pair_items: int = 2) -> Any:
    question: dict[str, Any] = {"name": "label", "level": level}
    if level == "ordinal":
        question["categories"] = LABELS["ordinal"]
    if level == "set":
        question["distance"] = "masi"
    return monitor_config_from_dict({
        "store": {"url_env": url_env} if url_env else {"url": f"sqlite:///{root / 'results.db'}"},
        "questions": [question],
        "monitor": {"source": {"path": str(root / "drop")}, "irr": irr,
                    "raters": {"min_pair_items": min_pair_items, "min_shared_items": 2}},
    })


def table(source: Source, level: str, items: set[int] | None = None) -> pd.DataFrame:
    rows = [{"item_id": f"i{i}", "rater_id": f"r{r}", "label": LABELS[level][c], "pool": pool}
            for (i, r), (c, pool) in sorted(source.items()) if items is None or i in items]
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])


def restate(monitor: Monitor, source: Source, items: set[int], level: str, k: int) -> dict[str, Any]:
    delivery = restatement(f"step {k}", table(source, level, items), [f"i{i}" for i in items])
    return monitor.merge([delivery])


change = st.tuples(st.integers(0, 6), st.integers(0, 4), st.integers(-1, 2), st.sampled_from(["crowd", "trusted"]))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.lists(change, min_size=1, max_size=14), min_size=2, max_size=5),
       level=st.sampled_from(["nominal", "ordinal", "interval", "set"]),
       irr=st.sampled_from(["krippendorff_alpha", "fleiss_kappa", "gwet_ac"]),
       fold=st.sampled_from([rater_store.FOLD_ROWS, 1, 4]))
def test_restatements_equal_the_core_on_the_current_judgements(tmp_path_factory, steps, level, irr, fold):
    """Each step creates, relabels, moves between pools (ground truth toggled) or deletes annotations (code -1), then
    restates the items it touched; after the sequence every cumulative metric and every per-rater row equals the core
    on the current annotations, as if computed from scratch. ``fold``: pending pair tallies are folded into the main
    table once a stream holds that many (the default; every pass; every few pairs)."""
    with patch.object(rater_store, "FOLD_ROWS", fold):
        _restatements_equal_the_core(tmp_path_factory, steps, level, irr)


def _restatements_equal_the_core(tmp_path_factory: Any, steps: list, level: str, irr: str) -> None:
    root = tmp_path_factory.mktemp("restate")
    cfg = config(root, level, irr)
    monitor = Monitor(cfg)
    source: Source = {}
    for k, step in enumerate(steps):
        for item, rater, code, pool in step:
            if code < 0:
                source.pop((item, rater), None)
            else:
                source[(item, rater)] = (code, pool)
        restate(monitor, source, {item for item, *_ in step}, level, k)
    again = restate(monitor, source, {i for i, _ in source}, level, len(steps))  # nothing changed: nothing moves
    assert again["n_new"] == 0
    assert again["questions"]["label"]["n_replaced"] == again["questions"]["label"]["n_removed"] == 0
    result = again["questions"]["label"]
    current = table(source, level)
    expected = core_expected([current], result["categories"], level, irr)
    for metric, value in expected["metrics"].items():
        got = result["cumulative"].get(metric, {}).get("value") if result["cumulative"] else None
        assert_close(got, value, metric)
    for pool_name, row, got in rater_pairs(cfg, expected, result["center"]):
        for key in ("n_ratings", "n_shared_items", "n_loo_items", "flags", "partners"):
            assert got[key] == row[key], f"{pool_name} {row['rater_id']} {key}"
    assert stored_pairs(monitor) == expected_pairs(source)


def stored_pairs(monitor: Monitor) -> dict[tuple[str, str, str], tuple[int, int]]:
    """The co-rating tallies the monitor keeps (pool, rater a, rater b) -> (items, agreements), zero ones left out: the
    main rows, or for a pair with pending tallies, the main row copied in the pending row plus the pending sum."""
    from sqlalchemy import select

    from labelgate.pipeline.tables import pair_deltas_table as d
    from labelgate.pipeline.tables import pairs_table as p

    with monitor.engine.connect() as conn:
        rows = conn.execute(select(p.c.pool, p.c.rater_a, p.c.rater_b, p.c.n, p.c.agree)).all()
        pending = conn.execute(select(d.c.pool, d.c.rater_a, d.c.rater_b, d.c.base_n + d.c.n,
                                      d.c.base_agree + d.c.agree)).all()
    totals = {(pool, a, b): (n, agree) for pool, a, b, n, agree in rows}
    totals.update({(pool, a, b): (n, agree) for pool, a, b, n, agree in pending})
    return {(("crowd", "trusted")[pool], a, b): (n, agree) for (pool, a, b), (n, agree) in totals.items() if n or agree}


def expected_pairs(source: Source) -> dict[tuple[str, str, str], tuple[int, int]]:
    out: dict[tuple[str, str, str], tuple[int, int]] = {}
    for (i, a), (ca, pa) in source.items():
        for (j, b), (cb, pb) in source.items():
            if i == j and pa == pb and f"r{a}" < f"r{b}":
                n, agree = out.get((pa, f"r{a}", f"r{b}"), (0, 0))
                out[(pa, f"r{a}", f"r{b}")] = (n + 1, agree + (ca == cb))
    return out


@pytest.fixture(params=["sqlite", "postgresql"])
def store_env(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The environment variable holding the store's URL: a SQLite file, or a database of its own on the PostgreSQL
    server of LABELGATE_TEST_POSTGRES_URL."""
    if request.param == "sqlite":
        monkeypatch.setenv("LG_RESTATE_STORE", f"sqlite:///{tmp_path / 'results.db'}")
        yield "LG_RESTATE_STORE"
        return
    with postgres_database("labelgate_restate") as url:
        monkeypatch.setenv("LG_RESTATE_STORE", url)
        yield "LG_RESTATE_STORE"


def test_an_update_replaces_a_deletion_removes_and_both_are_counted(tmp_path, store_env):
    cfg = config(tmp_path, url_env=store_env)
    monitor = Monitor(cfg)
    source: Source = {(0, 0): (0, "crowd"), (0, 1): (0, "crowd"), (1, 0): (1, "crowd"), (1, 1): (0, "crowd"),
                      (0, 9): (0, "trusted")}
    first = restate(monitor, source, {0, 1}, "nominal", 0)
    assert first["n_new"] == 5
    source[(1, 1)] = (1, "crowd")  # an update: the label changes
    del source[(0, 1)]  # a deletion
    summary = restate(monitor, source, {0, 1}, "nominal", 1)
    question = summary["questions"]["label"]
    assert (summary["n_new"], question["n_replaced"], question["n_removed"], question["n_conflicts"]) == (0, 1, 1, 0)
    assert question["n_already"] == 3
    delivery = summary["deliveries"][0]
    assert (delivery["n_replaced"], delivery["n_removed"]) == (1, 1)
    # item 1 is now unanimous, item 0 has one crowd rating left: SPA = 1 on the one pairable item
    assert question["cumulative"]["spa"]["value"] == pytest.approx(1.0)
    assert question["cumulative"]["spa"]["n_items"] == 1
    # a task deleted at the source: restated with no judgement, everything of it goes
    for key in [k for k in source if k[0] == 1]:
        del source[key]
    gone = restate(monitor, source, {1}, "nominal", 2)["questions"]["label"]
    assert gone["n_removed"] == 2
    assert gone["cumulative"]["spa"]["n_items"] == 0
    with monitor.engine.connect() as conn:  # what the reconciliation compares with the source's annotators
        assert judgements.item_raters(conn, cfg.monitor.name) == {"i0": {"r0", "r9"}}
    monitor.engine.dispose()


def test_pending_pair_tallies_fold_into_the_main_table(tmp_path, store_env):
    """With a fold every few pending rows, the tallies (main row, or main row copied in the pending row plus the
    pending sum) and the collusion candidates are those of all judgements at once, before and after a fold, through
    additions and removals; a fold leaves nothing pending."""
    from sqlalchemy import func, select

    from labelgate.pipeline.tables import pair_deltas_table

    cfg = config(tmp_path, url_env=store_env)
    monitor = Monitor(cfg)
    source: Source = {}
    pending_sizes = []
    with patch.object(rater_store, "FOLD_ROWS", 16):
        for k in range(6):
            for i in range(4):  # 5 of 8 raters rate items 4k..4k+3; the step relabels or removes an older item
                for r in range(5):
                    source[(4 * k + i, (r + k) % 8)] = ((i + r * (k % 2)) % 3, "crowd")
            if k >= 2:
                source.pop((4 * (k - 2), k % 8), None)
                source[(4 * (k - 1), (k - 1) % 8)] = ((k + 1) % 3, "crowd")
            restate(monitor, source, {4 * k + i for i in range(4)} | {4 * (k - 2), 4 * (k - 1)}, "nominal", k)
            assert stored_pairs(monitor) == expected_pairs(source), f"step {k}"
            with monitor.engine.connect() as conn:
                pending_sizes.append(conn.execute(select(func.count()).select_from(pair_deltas_table)).scalar())
            assert stored_candidates(monitor) == expected_candidates(source, 2), f"step {k}"
    assert 0 in pending_sizes and max(pending_sizes) > 0  # folded, and pending in between
    monitor.engine.dispose()


def test_a_main_candidate_is_taken_from_its_pending_row(tmp_path, store_env):
    """A pair that is a candidate in the main table and has pending tallies is read from its pending row alone: the
    candidate LIST (a duplicate counts) equals the one computed from scratch, before the first fold, after it, and
    when a restatement before the next fold takes a main candidate below ``min_pair_items`` (it is no candidate) or
    adds to one (it is listed once, with its total)."""
    cfg = config(tmp_path, url_env=store_env, min_pair_items=20)
    monitor = Monitor(cfg)
    source: Source = {}
    lists = []

    def check(step: int) -> None:
        got = stored_candidates(monitor)
        assert got == expected_candidates(source, 20), f"step {step}"
        lists.append(got)

    for i in range(25):  # r0, r1 share 25 items, r2 shares 22 of them with each: three candidates, all pending
        source[(i, 0)] = (i % 3, "crowd")
        source[(i, 1)] = (i % 2, "crowd")
        if i < 22:
            source[(i, 2)] = (0, "crowd")
    restate(monitor, source, set(range(25)), "nominal", 0)
    check(0)
    source[(100, 3)], source[(100, 4)] = (0, "crowd"), (1, "crowd")
    with patch.object(rater_store, "FOLD_ROWS", 1):  # the fold: the three candidates are main rows now
        restate(monitor, source, {100}, "nominal", 1)
    check(1)
    for i in range(10):  # before the next fold: r1 leaves 10 items, r2 rates 3 more of r0's
        del source[(i, 1)]
    for i in range(22, 25):
        source[(i, 2)] = (1, "crowd")
    restate(monitor, source, set(range(25)), "nominal", 2)
    check(2)
    # (r0, r1) and (r1, r2) at 15 items are candidates no more; (r0, r2) is listed once, at 25 items
    assert [len(x) for x in lists] == [3, 3, 1] and lists[2][0][1:4] == ("r0", "r2", 25)
    monitor.engine.dispose()


def stored_candidates(monitor: Monitor) -> list[tuple[str, str, str, int, int]]:
    """The collusion candidates the monitor reads (``rater_store.candidate_pairs``) as a sorted list: a pair listed
    twice is there twice."""
    from sqlalchemy import select

    from labelgate.pipeline.tables import streams_table

    with monitor.engine.connect() as conn:
        sid = conn.execute(select(streams_table.c.stream_id)).scalar_one()
        rows = rater_store.candidate_pairs(conn, sid)
    return sorted((("crowd", "trusted")[int(pool)], a, b, int(n), int(agree))
                  for pool, a, b, n, agree in rows.itertuples(index=False))


def expected_candidates(source: Source, min_pair_items: int) -> list[tuple[str, str, str, int, int]]:
    """The collusion candidates computed from scratch on the current annotations."""
    return sorted((*key, n, agree) for key, (n, agree) in expected_pairs(source).items() if n >= min_pair_items)


def test_file_deliveries_keep_first_wins(tmp_path):
    """Without a restatement a changed label is a conflict, counted and not merged (the files source's rule)."""
    cfg = config(tmp_path)
    monitor = Monitor(cfg)
    frame = table({(0, 0): (0, "crowd"), (0, 1): (1, "crowd")}, "nominal")
    from labelgate.pipeline.sources.deliveries import Delivery
    from labelgate.pipeline.sources.tables import content_hash

    monitor.merge([Delivery("a.csv", frame, content_hash(frame))])
    changed = frame.assign(label=["c", "b"])
    summary = monitor.merge([Delivery("b.csv", changed, content_hash(changed))])["questions"]["label"]
    assert (summary["n_new"], summary["n_conflicts"], summary["n_already"], summary["n_replaced"]) == (0, 1, 1, 0)


def test_hints_merge():
    assert (Hints(frozenset({1}), False) | Hints(frozenset({2}), True)) == Hints(frozenset({1, 2}), True)


def test_label_studio_source_settings_are_checked(tmp_path, monkeypatch):
    """The source needs its server's variable and a project; an unset variable, or a trusted file beside the project's
    trusted pool, fails the pass with a message naming it (recorded as an error pass, never a silent empty pass)."""
    from labelgate.errors import InputError
    from labelgate.monitor.engine import count_passes
    from labelgate.pipeline.config import ConfigError

    base = {"store": {"url": f"sqlite:///{tmp_path / 'r.db'}"}, "questions": [{"name": "label"}]}
    with pytest.raises(ConfigError, match="url_env.*project"):
        monitor_config_from_dict({**base, "monitor": {"source": {"kind": "label_studio", "url_env": "LG_LS"}}})
    source = {"kind": "label_studio", "url_env": "LG_LS_UNSET", "project": 3, "control": "sentiment"}
    cfg = monitor_config_from_dict({**base, "monitor": {"source": source}})
    monkeypatch.delenv("LG_LS_UNSET", raising=False)
    with pytest.raises(InputError, match="LG_LS_UNSET"):
        Monitor(cfg).run_pass(send_alerts=False)
    trusted = tmp_path / "experts.csv"
    trusted.write_text("item_id,rater_id,label\n1,e,x\n")
    with pytest.raises(InputError, match="trusted.path"):
        Monitor(monitor_config_from_dict({**base, "trusted": {"path": str(trusted)},
                                          "monitor": {"source": source}})).run_pass(send_alerts=False)
    assert count_passes(cfg, status="error") == 2
