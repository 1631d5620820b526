"""The expectations of one suite build the crowd / trusted pools once per batch, never from stale data."""

from __future__ import annotations

import great_expectations as gx
import pytest

import labelgate.gx as lgx
from labelgate.gx import _metrics
from labelgate.pipeline.synth import scenario_named, simulate

SUITE = {"name": "shared", "defaults": {"crowd_pool": "crowd", "trusted_pool": "trusted", "n_boot": 50, "seed": 0},
         "expectations": [{"type": "normalized_cross_kappa", "min_value": 0.5}, {"type": "cross_kappa", "min_value": 0.1},
                          {"type": "irr_baseline", "tolerance": 0.1}, {"type": "spa", "min_value": 0.1}]}


@pytest.fixture()
def builds(monkeypatch):
    calls = []
    original = _metrics.build_pools

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(_metrics, "build_pools", counting)
    return calls


def _validate(df):
    context = gx.get_context(mode="ephemeral")
    batch = (context.data_sources.add_pandas("p").add_dataframe_asset("a").add_batch_definition_whole_dataframe("w")
             .get_batch(batch_parameters={"dataframe": df}))
    return batch.validate(lgx.suite_from_config(SUITE))


def test_one_build_for_four_expectations_and_a_rebuild_after_a_change(builds):
    df = simulate(scenario_named("good", 400), seed=1)
    first = _validate(df)
    assert len(first.results) == 4
    assert len(builds) == 1  # one build, shared by the four expectations (was one per expectation)
    values = [r.result["observed_value"] for r in first.results]
    df.loc[df["pool"] == "crowd", "label"] = df.loc[df["pool"] == "crowd", "label"].sample(frac=1, random_state=0).to_numpy()
    second = _validate(df)  # the same DataFrame object, changed in place: never the old pools
    assert len(builds) == 2
    assert [r.result["observed_value"] for r in second.results] != values
