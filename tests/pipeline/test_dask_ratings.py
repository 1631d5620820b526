"""Dask backend: the partitioned path equals the in-memory path (statistics, every metric, bootstrap, errors).

Random tables are cut into random partitions (single-row and empty partitions, items split across
partitions) and built on a 2-worker ``LocalCluster`` (separate processes, so everything crosses pickling).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

dask = pytest.importorskip("dask", reason="the Dask backend needs the 'dask' extra (pip install labelgate[dask])")
dd = pytest.importorskip("dask.dataframe", reason="the Dask backend needs dask[dataframe]")
distributed = pytest.importorskip("distributed", reason="the LocalCluster tests need dask.distributed")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import labelgate as lg  # noqa: E402
from labelgate.metrics.registry import METRICS  # noqa: E402
from labelgate.pipeline.dask_ratings import (  # noqa: E402
    DistributedError,
    PartitionedRatings,
    ratings_by_pool_dask,
    ratings_from_dask,
)
from labelgate.pipeline.dask_ratings.kernels import KeySpace  # noqa: E402

# The LocalCluster's scheduler runs in this process and calls the `random` module from its event-loop thread
# (worker selection, retry jitter); hypothesis notices the global random state moving while it draws. The
# strategies below draw only from hypothesis, so the warning is about the scheduler, not the data.
pytestmark = pytest.mark.filterwarnings("ignore:Do not use the `random` module inside strategies")

TOL = 1e-12
# label sets: (level, values); integer values let the driver derive moments from the counts, the others are
# summed on the workers
LABELS = {"nominal": ("nominal", ["x", "y", "z"]), "ordinal": ("ordinal", [1, 2, 3, 4]),
          "interval": ("interval", [0.1, 0.7, 2.5, 4.0]), "interval_int": ("interval", [-2, 0, 3, 10]),
          "ratio": ("ratio", [0.0, 0.3, 1.0, 2.2])}


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def partitioned(df: pd.DataFrame, cuts: list[int]) -> dd.DataFrame:
    """``df`` cut at the given row positions (repeated cuts give empty partitions)."""
    bounds = [0, *sorted(cuts), len(df)]
    pieces = [df.iloc[a:b] for a, b in itertools.pairwise(bounds)]
    return dd.from_delayed([dask.delayed(p) for p in pieces], meta=df.iloc[:0], verify_meta=False)


@st.composite
def tables(draw, pooled: bool = False):
    level, values = LABELS[draw(st.sampled_from(sorted(LABELS)))]
    n = draw(st.integers(2, 60))
    n_items = draw(st.integers(1, 12))
    raters = draw(st.sampled_from([["a", "b"], ["a", "b", "c"], ["r1", "r2", "r3", "r4", "r5"]]))
    labels = values[: draw(st.integers(1, len(values)))]
    rows = draw(st.lists(st.tuples(st.integers(0, n_items - 1), st.sampled_from(raters),
                                   st.sampled_from([*labels, None]), st.sampled_from(["crowd", "trusted"])),
                         min_size=n, max_size=n))
    df = pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])
    df["item_id"] = "item-" + df["item_id"].astype(str)
    if level != "nominal":
        df["label"] = df["label"].astype(float)
    cuts = draw(st.lists(st.integers(0, n), max_size=8))
    # force single-row partitions at the start sometimes
    if draw(st.booleans()):
        cuts += [1, 2]
    return level, df if pooled else df.drop(columns="pool"), cuts


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=TOL, abs_tol=TOL)


def assert_same_estimate(x: lg.Estimate, y: lg.Estimate, where: str) -> None:
    assert same(x.value, y.value), (where, x.value, y.value)
    assert (x.ci is None) == (y.ci is None), (where, x.ci, y.ci)
    if x.ci is not None:
        assert same(x.ci[0], y.ci[0]) and same(x.ci[1], y.ci[1]), (where, x.ci, y.ci)
    assert (x.n_items, x.n_ratings, x.n_items_excluded) == (y.n_items, y.n_ratings, y.n_items_excluded), where
    assert x.reason_code == y.reason_code, where
    assert x.details.keys() == y.details.keys(), where
    for key in x.details:
        a, b = x.details[key], y.details[key]
        if isinstance(a, float):
            assert same(a, b), (where, key, a, b)
        else:
            assert a == b, (where, key, a, b)


def outcome(func, *args, **kw):
    """The result, or the error type, code and message."""
    try:
        return func(*args, **kw)
    except lg.LabelGateError as exc:
        return (type(exc).__name__, exc.code, exc.message)


def assert_same_statistics(p: PartitionedRatings, m: lg.Ratings) -> None:
    assert p.categories == m.categories and p.level == m.level
    assert list(p.item_labels) == list(m.item_labels) and list(p.rater_labels) == list(m.rater_labels)
    assert (p.n_items, p.n_raters, p.n_ratings, p.n_dropped_missing) == (m.n_items, m.n_raters, m.n_ratings,
                                                                        m.n_dropped_missing)
    np.testing.assert_array_equal(p.ratings_per_item, m.ratings_per_item)
    np.testing.assert_array_equal(p.item_counts, m.item_counts)
    np.testing.assert_array_equal(p.rater_counts, m.rater_counts)
    np.testing.assert_allclose(p.item_moments, m.item_moments, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(p.rater_moments, m.rater_moments, rtol=TOL, atol=TOL)
    assert p.moment_center == m.moment_center
    np.testing.assert_allclose(p.centered_item_moments(), m.centered_item_moments(), rtol=TOL, atol=TOL)
    # per-judgement codes, fetched from the workers last: the statistics above did not need them
    assert p._codes is None
    np.testing.assert_array_equal(p.item_codes, m.item_codes)
    np.testing.assert_array_equal(p.rater_codes, m.rater_codes)
    np.testing.assert_array_equal(p.value_codes, m.value_codes)


def registered(kind: str, level: str, n_raters: int = 0):
    """(spec, keyword arguments) of every registered metric of this kind that accepts ``level``."""
    for spec in METRICS:
        if (spec.kind == "cross") != (kind == "cross") or level not in spec.levels:
            continue
        if spec.two_raters_only and n_raters != 2:
            continue
        interval = BOOT if spec.bootstrap else {"ci": BOOT["ci"]}  # Phi: a likelihood interval, no resampling
        yield from ((spec, {**options, **interval}) for options in spec.options)


BOOT = {"ci": 0.9, "n_boot": 40, "seed": 7}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=tables(), duplicates=st.sampled_from(["first", "last", "error"]))
def test_every_metric_equals_the_in_memory_path(client, data, duplicates):
    level, df, cuts = data
    memory = outcome(lg.Ratings.from_long, df, level=level, duplicates=duplicates)
    dist = outcome(ratings_from_dask, partitioned(df, cuts), level=level, duplicates=duplicates)
    if isinstance(memory, tuple):  # the same error, with the same message
        assert dist == memory
        return
    assert isinstance(dist, PartitionedRatings)
    assert_same_statistics(dist, memory)
    for spec, options in registered("single", level, memory.n_raters):
        a, b = outcome(spec.func, dist, **options), outcome(spec.func, memory, **options)
        where = f"{spec.name} {options}"
        if isinstance(b, tuple):
            assert a == b, where
        elif spec.kind == "per_category":
            assert a.keys() == b.keys()
            for k in a:
                assert_same_estimate(a[k], b[k], f"{where} [{k}]")
        else:
            assert_same_estimate(a, b, where)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=tables(pooled=True))
def test_cross_replication_metrics_equal_the_in_memory_split(client, data):
    level, df, cuts = data
    memory = outcome(lg.ratings_by_pool, df, level=level, duplicates="last")
    dist = outcome(ratings_by_pool_dask, partitioned(df, cuts), level=level, duplicates="last")
    if isinstance(memory, tuple):
        assert dist == memory
        return
    assert list(dist) == list(memory)
    for name in memory:
        assert_same_statistics(dist[name], memory[name])
    if set(memory) != {"crowd", "trusted"}:
        return
    x, y = dist["crowd"], dist["trusted"]
    assert x.item_labels is y.item_labels  # one shared item index, as in the in-memory split
    for spec, options in registered("cross", level):
        a = outcome(spec.func, x, y, **options)
        b = outcome(spec.func, memory["crowd"], memory["trusted"], **options)
        if isinstance(b, tuple):
            assert a == b, spec.name
        else:
            assert_same_estimate(a, b, f"{spec.name} {options}")


def test_items_split_across_partitions_get_one_code(client):
    # item "a" has one rating in each of three single-row partitions: only the combination makes it pairable
    df = pd.DataFrame({"item_id": ["a", "b", "a", "b", "a"], "rater_id": ["r1", "r1", "r2", "r2", "r3"],
                       "label": ["x", "y", "x", "x", "y"]})
    r = ratings_from_dask(partitioned(df, [1, 2, 3, 4]))
    assert r.n_partitions == 5
    assert list(r.item_labels) == ["a", "b"]
    assert r.item_counts.tolist() == [[2, 1], [1, 1]]
    assert r.ratings_per_item.tolist() == [3, 2]
    assert float(lg.krippendorff_alpha(r)) == float(lg.krippendorff_alpha(lg.Ratings.from_long(df)))


def test_count_metrics_do_not_fetch_the_codes_but_conger_intervals_do(client):
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"item_id": rng.integers(0, 30, 200), "rater_id": rng.integers(0, 6, 200),
                       "label": rng.integers(0, 3, 200)})
    r = ratings_from_dask(dd.from_pandas(df, npartitions=4), duplicates="first")
    for func in (lg.krippendorff_alpha, lg.fleiss_kappa, lg.gwet_ac, lg.spa, lg.percent_agreement):
        func(r, ci=0.95, n_boot=50, seed=1)
    assert r._codes is None
    lg.conger_kappa(r)  # every item rated: the point estimate reads the rater x category counts
    assert r._codes is None
    lg.conger_kappa(r, ci=0.95, n_boot=50, seed=1)  # its interval needs each judgement's rater
    assert r._codes is not None


def test_released_codes_give_a_clear_error(client):
    df = pd.DataFrame({"item_id": [1, 1, 2, 2], "rater_id": ["a", "b", "a", "b"], "label": [0, 1, 1, 1]})
    r = ratings_from_dask(dd.from_pandas(df, npartitions=2))
    r.release()
    assert math.isfinite(float(lg.percent_agreement(r)))  # statistics stay on the driver
    assert math.isfinite(float(lg.conger_kappa(r)))  # every item rated: the rater x category counts suffice
    with pytest.raises(DistributedError, match="released"):
        lg.conger_kappa(r, ci=0.95, n_boot=50, seed=1)


def test_errors_match_the_in_memory_builder(client):
    df = pd.DataFrame({"item_id": [1, 1, None, 2], "rater_id": ["a", "b", "a", "b"], "label": [0, 1, 1, None]})
    ok = df.dropna(subset=["item_id"])
    words = pd.DataFrame({"item_id": [1, 1, 2], "rater_id": ["a", "b", "a"], "label": ["1", "2", "x"]})
    cases = [
        (df, {}),                                          # missing item id
        (df, {"item": "rater_id", "rater": "item_id"}),    # missing rater id
        (ok, {"missing": "error"}),                        # missing label
        (ok, {"categories": [0]}),                         # label 1 is not a category
        (words, {"level": "interval"}),                    # non-numeric label
        (words, {"level": "ordinal", "categories": ["2", "1"]}),  # "x" is not a category
        (ok.iloc[[0, 0, 1]].reset_index(drop=True), {}),   # duplicate judgement
    ]
    for frame, kw in cases:
        expected = outcome(lg.Ratings.from_long, frame, **kw)
        assert isinstance(expected, tuple), kw
        assert outcome(ratings_from_dask, dd.from_pandas(frame, npartitions=3), **kw) == expected, kw
    ddf = dd.from_pandas(ok, npartitions=2)
    with pytest.raises(lg.InputError, match="column") as err:
        ratings_from_dask(ddf, value="nope")
    assert err.value.code == lg.Reason.MISSING_COLUMN
    with pytest.raises(lg.InputError, match="empty"):
        ratings_from_dask(dd.from_pandas(df.iloc[:0], npartitions=1))
    with pytest.raises(lg.ParameterError, match="dask DataFrame"):
        ratings_from_dask(df)
    with pytest.raises(lg.ParameterError, match="duplicates"):
        ratings_from_dask(ddf, duplicates="any")


def test_judgement_keys_that_overflow_64_bits_are_refused():
    assert KeySpace(2, 2**20, 2**20).split(((1 * 2**20 + 5) * 2**20) + 7) == (1, 5, 7)
    with pytest.raises(lg.InputError, match="64-bit keys") as err:
        KeySpace(2, 2**31, 2**31)
    assert err.value.code == lg.Reason.TOO_MANY_CATEGORIES


def test_parquet_dataset_round_trip(client, tmp_path):
    rng = np.random.default_rng(5)
    n = 3000
    df = pd.DataFrame({"item_id": rng.integers(0, 400, n), "rater_id": rng.integers(0, 25, n).astype(str),
                       "label": rng.integers(1, 6, n), "pool": rng.choice(["crowd", "trusted"], n)})
    df = df.drop_duplicates(["item_id", "rater_id", "pool"]).reset_index(drop=True)
    bounds = np.linspace(0, len(df), 7).astype(int)
    for k in range(6):
        df.iloc[bounds[k]:bounds[k + 1]].to_parquet(tmp_path / f"part-{k}.parquet")
    ddf = dd.read_parquet(str(tmp_path))
    pools = ratings_by_pool_dask(ddf, level="ordinal")
    memory = lg.ratings_by_pool(pd.read_parquet(tmp_path).reset_index(drop=True), level="ordinal")
    a = lg.normalized_cross_kappa(pools["crowd"], pools["trusted"], ci=0.95, n_boot=200, seed=0)
    b = lg.normalized_cross_kappa(memory["crowd"], memory["trusted"], ci=0.95, n_boot=200, seed=0)
    assert_same_estimate(a, b, "normalized_cross_kappa on parquet")


# ----------------------------------------------------------------------------------- the gate on Dask
GATE_CONFIG = """
gates:
  - type: normalized_cross_kappa
    min_value: 0.8
  - type: irr_baseline
    tolerance: 0.1
interval: {{n_boot: 200, seed: 0}}
coverage: {{min_coverage: 0.1, min_common_items: 10}}
columns: {{question: question}}
questions: [{{name: sentiment}}, {{name: topic}}]
store: {{url: "sqlite:///{root}/results.db"}}
reports: {{dir: "{root}/reports"}}
runner: {runner}
"""


def test_dask_task_runner_settings():
    from types import SimpleNamespace

    pytest.importorskip("prefect_dask", reason="the Dask runner needs prefect-dask (the 'dask' extra)")
    from labelgate.flows.gate import dask_task_runner

    remote = dask_task_runner(SimpleNamespace(dask=SimpleNamespace(address="tcp://scheduler:8786")))
    assert remote.address == "tcp://scheduler:8786"
    local = dask_task_runner(SimpleNamespace())  # a config without a `dask` section: a 2-process LocalCluster
    assert local.address is None
    assert local.cluster_kwargs["n_workers"] == 2 and local.cluster_kwargs["threads_per_worker"] == 1
    assert local.cluster_kwargs["processes"] is True


def test_questions_fan_out_on_dask_and_match_the_local_run(client, prefect_api, tmp_path, monkeypatch):
    pytest.importorskip("prefect_dask", reason="the Dask runner needs prefect-dask (the 'dask' extra)")
    from prefect_dask import DaskTaskRunner

    from labelgate.flows import gate as flow_module
    from labelgate.pipeline.synth import Scenario, simulate

    # the module's LocalCluster stands for a cluster given by `dask.address`
    monkeypatch.setattr(flow_module, "dask_task_runner",
                        lambda cfg: DaskTaskRunner(address=client.scheduler.address))
    data = simulate(Scenario(n_items=400, questions=("sentiment", "topic")), seed=11)
    batch, trusted = tmp_path / "batch.csv", tmp_path / "trusted.csv"
    data[data["pool"] == "crowd"].to_csv(batch, index=False)
    data[data["pool"] == "trusted"].to_csv(trusted, index=False)
    results = {}
    for runner in ("local", "dask"):
        root = tmp_path / runner
        root.mkdir()
        config = root / "gate.yaml"
        config.write_text(GATE_CONFIG.format(root=root.as_posix(), runner=runner), encoding="utf-8")
        results[runner] = flow_module.run_gate_flow(str(config), batch=str(batch), trusted=str(trusted))
    local, dist = results["local"], results["dask"]
    assert dist["decision"] == local["decision"] != "ERROR", dist["reasons"]
    assert dist["reasons"] == local["reasons"]
    assert dist["metrics"] == local["metrics"]  # same numbers, whichever process computed them
    # each question had its own GX project (they ran as separate tasks)
    run_dirs = [p for p in (tmp_path / "dask" / "reports").iterdir() if p.name != "gx-static"]  # shared GX assets
    assert len(run_dirs) == 1
    assert {p.name for p in (run_dirs[0] / "questions").iterdir()} == {"sentiment", "topic"}


DRAWN_CONFIG = """
gates:
  - {{type: normalized_cross_kappa, min_value: 0.75}}
  - {{type: cross_kappa, min_value: 0.6}}
  - {{type: spa, min_value: 0.5}}
interval: {{n_boot: 60, seed: 0}}
columns: {{question: question}}
questions:
  - {{name: topics, level: set, distance: masi, sep: "|"}}
  - {{name: ner, kind: spans, categories: [PER, LOC, ORG]}}
  - {{name: objects, kind: boxes}}
store: {{url: "sqlite:///{root}/results.db"}}
reports: {{dir: "{root}/reports"}}
runner: {runner}
"""


def test_sets_spans_and_boxes_fan_out_on_dask_and_match_the_local_run(client, prefect_api, tmp_path, monkeypatch):
    """The gate's Dask fan-out measures each question's rows of the expanded table in a worker process: label sets
    (in their canonical form), span positions and box objects give the local run's numbers there."""
    pytest.importorskip("prefect_dask", reason="the Dask runner needs prefect-dask (the 'dask' extra)")
    from prefect_dask import DaskTaskRunner

    from labelgate.flows import gate as flow_module
    from tests.gate import drawn

    monkeypatch.setattr(flow_module, "dask_task_runner",
                        lambda cfg: DaskTaskRunner(address=client.scheduler.address))
    sets = drawn.sets(n_items=80, seed=1)
    frame = pd.concat([sets.assign(label=sets["label"].map(lambda tags: "|".join(tags) or "|"), question="topics"),
                       drawn.spans(n_docs=20, seed=2).assign(question="ner"),
                       drawn.boxes(n_images=30, seed=3).assign(question="objects")], ignore_index=True)
    both = tmp_path / "both.csv"
    frame.to_csv(both, index=False)
    results = {}
    for runner in ("local", "dask"):
        root = tmp_path / runner
        root.mkdir()
        config = root / "gate.yaml"
        config.write_text(DRAWN_CONFIG.format(root=root.as_posix(), runner=runner), encoding="utf-8")
        results[runner] = flow_module.run_gate_flow(str(config), batch=str(both))
    local, dist = results["local"], results["dask"]
    assert local["decision"] == "ACCEPT", local["reasons"]
    assert dist["decision"] == local["decision"] and dist["reasons"] == local["reasons"]
    assert set(local["metrics"]) == {"topics", "ner", "objects"}
    assert dist["metrics"] == local["metrics"]
    assert dist["units"] == local["units"]
    run_dirs = [p for p in (tmp_path / "dask" / "reports").iterdir() if p.name != "gx-static"]
    assert {p.name for p in (run_dirs[0] / "questions").iterdir()} == {"topics", "ner", "objects"}


def test_label_sets_are_refused_with_the_route_that_builds_them(client):
    frame = pd.DataFrame({"item_id": [1, 1], "rater_id": ["a", "b"], "label": ["x|y", "x"]})
    with pytest.raises(lg.ParameterError, match="got 'set'") as refused:
        ratings_from_dask(dd.from_pandas(frame, npartitions=1), level="set")
    assert "Ratings.from_long(frame.compute(), level='set'" in str(refused.value)
    with pytest.raises(lg.ParameterError, match="Ratings.from_long"):
        ratings_by_pool_dask(dd.from_pandas(frame.assign(pool="crowd"), npartitions=1), level="set")
