"""Model-based reliability on the real replicated datasets of ``../shared/data`` (skips when absent).

The parametric normalized xCC (``cross_correlation``) is checked against the
non-parametric normalized kappa_x and Spearman's disattenuated correlation,
which the xRR paper (§4.5) and the blog report to be about equal. Numbers are
in docs/variance-components.md (``benchmarks/bench_variance.py --real-data``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
from labelgate.metrics.variance import item_icc, labeler_icc
from labelgate.metrics.xcc import cross_correlation, disattenuated_correlation

DATA = Path(os.environ.get("LABELGATE_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
if not DATA.is_dir():
    pytest.skip(f"shared datasets not found at {DATA} (set LABELGATE_SHARED_DATA)", allow_module_level=True)


def _need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return path


@pytest.fixture(scope="module")
def face() -> pd.DataFrame:
    return pd.read_csv(_need(DATA / "face_emotion_xcultural" / "face_emotion_xcultural_long.csv.gz"))


@pytest.fixture(scope="module")
def brexit() -> pd.DataFrame:
    data = pd.read_csv(_need(DATA / "lewidi" / "lewidi_long.csv.gz"), dtype={"label": str})
    data = data[(data.dataset == "HS-Brexit") & data.label.isin(["0", "1"])].copy()
    data["label"] = data.label.astype(int)
    return data


@pytest.fixture(scope="module")
def babe() -> dict[str, lg.Ratings]:
    data = pd.read_csv(_need(DATA / "babe_mbic" / "babe_mbic_long.csv.gz"))
    data = data[data.pool.isin(["crowd_mturk", "expert_sg1"]) & data.label_bias.isin(["Biased", "Non-biased"])]
    data = data.assign(bias=(data.label_bias == "Biased").astype(int))
    # MBIC has 20 repeated worker-sentence pairs (README quirks): keep the first
    return lg.ratings_by_pool(data, pool="pool", value="bias", duplicates="first")


@pytest.mark.parametrize("scale", ["happy", "sad", "angry", "fearful", "disgusted", "surprised"])
def test_face_emotion_rho_is_close_to_normalized_kappa_x(face, scale):
    pools = lg.ratings_by_pool(face[face.scale == scale], level="ordinal", categories=[0, 1, 2, 3, 4])
    x, y = pools["caucasian_raters"], pools["taiwanese_raters"]
    rho = cross_correlation(x, y)
    assert rho.n_items == 150
    assert abs(rho.value - float(lg.normalized_cross_kappa(x, y))) < 0.1
    assert abs(rho.value - float(disattenuated_correlation(x, y, seed=0))) < 0.05


@pytest.mark.parametrize("task", ["hate_speech", "aggressive", "offensive"])
def test_hs_brexit_rho_against_normalized_kappa_x(brexit, task):
    pools = lg.ratings_by_pool(brexit[brexit.task == task])
    x, y = pools["target"], pools["control"]
    rho = cross_correlation(x, y)
    kappa = lg.normalized_cross_kappa(x, y)
    assert rho.n_items == 1120
    # correlation-type measures agree; kappa_x also penalises the pools' different positive rates, so it
    # is not above rho here (largest gap 0.14 on hate speech, see the docs)
    assert abs(rho.value - float(disattenuated_correlation(x, y, seed=0))) < 0.05
    assert kappa.value <= rho.value + 0.02


def test_babe_crowd_vs_experts(babe):
    crowd, experts = babe["crowd_mturk"], babe["expert_sg1"]
    rho = cross_correlation(crowd, experts)
    assert abs(rho.value - float(lg.normalized_cross_kappa(crowd, experts))) < 0.05
    assert rho.details["xcc"] == pytest.approx(rho.value * np.sqrt(rho.details["icc_x"] * rho.details["icc_y"]))
    for pool in (crowd, experts):  # the blog's gate "labeler ICC < ICC" passes for both pools
        assert float(labeler_icc(pool)) < float(item_icc(pool))


def test_babe_experts_latent_scale_exceeds_observed_scale(babe):
    experts = babe["expert_sg1"]
    latent = item_icc(experts, scale="latent")
    assert latent.details["converged"]
    assert float(item_icc(experts)) < latent.value < 1
