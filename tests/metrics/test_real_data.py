"""Sanity checks of the metrics core on the real replicated datasets (``benchmarks/real_data_panel.py``).

The whole module skips when the shared data folder is absent (set
``LABELGATE_SHARED_DATA`` to point elsewhere). Counts are the ones stated in
each dataset's README; peers (krippendorff, irrCAC) and brute-force pair
enumerations give independent values.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import labelgate as lg

_PANEL_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "real_data_panel.py"
_spec = importlib.util.spec_from_file_location("real_data_panel", _PANEL_PATH)
assert _spec is not None and _spec.loader is not None
panel_module = importlib.util.module_from_spec(_spec)
sys.modules["real_data_panel"] = panel_module
_spec.loader.exec_module(panel_module)

ROOT = panel_module.data_dir()
if not ROOT.is_dir():
    pytest.skip(f"shared datasets not found at {ROOT} (set {panel_module.DATA_ENV})", allow_module_level=True)

N_BOOT = 200
SEED = 7


def _need(name: str) -> None:
    if not (ROOT / name).is_dir():
        pytest.skip(f"dataset folder {ROOT / name} is absent")


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    present = [n for n in panel_module.DATASETS
               if (ROOT / {"hs_brexit": "lewidi", "popquorn": "popquorn_offensiveness"}.get(n, n)).is_dir()]
    if not present:
        pytest.skip("none of the panel's datasets is present")
    return panel_module.panel(ROOT, present, n_boot=N_BOOT, seed=SEED)


def _questions(dataset: str) -> list[Any]:
    return list(panel_module.DATASETS[dataset](ROOT))


def _question(dataset: str, question: str, level: str) -> Any:
    return next(q for q in _questions(dataset) if q.question == question and q.level == level)


# ------------------------------------------------------------------ panel-wide properties
def test_panel_covers_every_pair(rows: list[dict[str, Any]]) -> None:
    expected = {"babe_mbic": 2, "hs_brexit": 3, "annotation_sensitivity": 8, "face_emotion_xcultural": 12,
                "popquorn": 2}
    counts = pd.Series([r["dataset"] for r in rows]).value_counts().to_dict()
    assert counts == {k: v for k, v in expected.items() if k in counts}


def test_values_finite_and_bounded(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        label = (r["dataset"], r["question"], r["level"], r["pool_y"])
        for key in ("x_alpha", "y_alpha", "kappa_x"):
            assert math.isfinite(r[key]) and -1.0 <= r[key] <= 1.0, (label, key, r[key])
        for key in ("x_spa", "y_spa"):
            assert 0.0 <= r[key] <= 1.0, (label, key, r[key])
        assert math.isfinite(r["norm_kappa_x"]) and r["norm_reason"] is None, label
        if r["level"] == "nominal":
            for key in ("x_fleiss", "y_fleiss", "x_ac1", "y_ac1"):
                assert math.isfinite(r[key]) and -1.0 <= r[key] <= 1.0, (label, key, r[key])


def test_intervals_contain_point(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        label = (r["dataset"], r["question"], r["level"], r["pool_y"])
        for point, ci in (("kappa_x", "kappa_x_ci"), ("norm_kappa_x", "norm_kappa_x_ci"),
                          ("x_alpha", "alpha_x_ci"), ("y_alpha", "alpha_y_ci")):
            low, high = r[ci]
            assert low <= r[point] <= high, (label, point, low, r[point], high)
            assert high - low > 0, (label, point)


def test_normalized_is_kappa_x_over_geometric_mean_of_separate_alphas(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        # x_alpha / y_alpha come from lg.krippendorff_alpha on the common-item subsets, not from
        # normalized_cross_kappa: the two computations must agree.
        assert r["x_alpha"] == pytest.approx(r["irr_x_in_norm"], abs=1e-12)
        assert r["y_alpha"] == pytest.approx(r["irr_y_in_norm"], abs=1e-12)
        expected = r["kappa_x"] / math.sqrt(r["x_alpha"] * r["y_alpha"])
        assert r["norm_kappa_x"] == pytest.approx(expected, rel=1e-12)


def test_kappa_x_equals_separate_cross_kappa() -> None:
    _need("lewidi")
    for q in _questions("hs_brexit"):
        x, y = q.pools["target"], q.pools["control"]
        norm = lg.normalized_cross_kappa(x, y)
        assert norm.details["cross_kappa"] == pytest.approx(lg.cross_kappa(x, y).value, abs=1e-14)


def test_bootstrap_is_reproducible_with_a_seed() -> None:
    _need("lewidi")
    q = _question("hs_brexit", "aggressive", "nominal")
    a = panel_module.pair_row(q, "target", "control", n_boot=N_BOOT, seed=SEED)
    b = panel_module.pair_row(q, "target", "control", n_boot=N_BOOT, seed=SEED)
    assert a["norm_kappa_x_ci"] == b["norm_kappa_x_ci"]
    # normalized κx's default interval is the delta method (no resampling): the seed shows on a bootstrap interval
    x, y = q.pools["target"], q.pools["control"]

    def bca(seed: int) -> tuple[float, float] | None:
        return lg.normalized_cross_kappa(x, y, irr="krippendorff_alpha", n_boot=N_BOOT, seed=seed, ci=0.95,
                                         ci_method="bca").ci

    assert bca(SEED) == bca(SEED)
    assert bca(SEED) != bca(SEED + 1)


# ------------------------------------------------------------------ README counts
def test_babe_mbic_counts() -> None:
    _need("babe_mbic")
    dups = panel_module.babe_mbic_duplicates(ROOT)
    pairs = dups.groupby(["item_id", "rater_id"])
    assert pairs.ngroups == 20 and len(dups) == 40
    assert int((pairs["label_bias"].nunique() > 1).sum()) == 6  # README: 14 pairs agree, 6 conflict
    df = panel_module.load_babe_mbic(ROOT)
    assert len(df) == 31_347 - 20
    bias = _question("babe_mbic", "label_bias", "nominal")
    crowd, experts = bias.pools["crowd_mturk"], bias.pools["expert_sg1"]
    assert int((crowd.ratings_per_item > 0).sum()) == 1_700
    assert int((experts.ratings_per_item > 0).sum()) == 1_698  # "2 have none"
    assert panel_module.common_items(crowd, experts).size == 1_698
    assert crowd.n_ratings == 17_775 - 20
    assert experts.n_ratings == 13_572 - 27 and experts.n_dropped_missing == 27
    assert crowd.n_raters == 809 and experts.n_raters == 8
    opinion = _question("babe_mbic", "label_opinion", "ordinal")
    assert opinion.pools["expert_sg1"].n_dropped_missing == 151
    expert_counts = np.bincount(experts.ratings_per_item)  # items with 0..8 expert labels (bias)
    assert expert_counts[0] == 2 and expert_counts[8] >= 1_660


def test_hs_brexit_counts() -> None:
    _need("lewidi")
    for q in _questions("hs_brexit"):
        x, y = q.pools["target"], q.pools["control"]
        assert panel_module.common_items(x, y).size == 1_120
        assert x.n_raters == 3 and y.n_raters == 3
        missing = 3 if q.question == "offensive" else 0  # the three "No" labels, all by a target rater
        assert x.n_ratings == 3_360 - missing and y.n_ratings == 3_360
    positives = {q.question: int(sum((p.value_codes == 1).sum() for p in q.pools.values()))
                 for q in _questions("hs_brexit")}
    assert positives == {"hate_speech": 869, "aggressive": 753, "offensive": 1_478}


def test_annotation_sensitivity_counts() -> None:
    _need("annotation_sensitivity")
    rows_per_pool = {"A": 9_000, "B": 9_000, "C": 8_950, "D": 8_950, "E": 9_000}
    for q, n_missing in zip(_questions("annotation_sensitivity"), (311, 39), strict=True):
        assert sorted(q.pools) == list("ABCDE")
        for name, pool in q.pools.items():
            assert int((pool.ratings_per_item > 0).sum()) == 3_000, (q.question, name)
            assert pool.n_ratings + pool.n_dropped_missing == rows_per_pool[name], (q.question, name)
        assert sum(p.n_dropped_missing for p in q.pools.values()) == n_missing
        for _, other in q.pairs:
            assert panel_module.common_items(q.pools["A"], q.pools[other]).size == 3_000
        raters = [set(p.rater_labels[np.unique(p.rater_codes)].tolist()) for p in q.pools.values()]
        assert sum(len(s) for s in raters) == len(set().union(*raters))  # disjoint pools


def test_face_emotion_counts() -> None:
    _need("face_emotion_xcultural")
    for q in _questions("face_emotion_xcultural"):
        x, y = q.pools["caucasian_raters"], q.pools["taiwanese_raters"]
        assert panel_module.common_items(x, y).size == 150
        assert x.n_raters == 20 and y.n_raters == 20
        missing = 2 if q.question == "fearful" else 0
        assert x.n_ratings == 3_000 and y.n_ratings == 3_000 - missing


# ------------------------------------------------------------------ peers and brute force
def _reliability_matrix(r: lg.Ratings, numeric: bool) -> np.ndarray:
    """Raters x items matrix of category codes (or values), NaN = missing: the krippendorff input."""
    out = np.full((r.n_raters, r.n_items), np.nan)
    out[r.rater_codes, r.item_codes] = r.values if numeric else r.value_codes
    return out


@pytest.mark.parametrize(("dataset", "question", "level"), [
    ("babe_mbic", "label_bias", "nominal"),
    ("babe_mbic", "label_opinion", "ordinal"),
    ("hs_brexit", "offensive", "nominal"),
    ("face_emotion_xcultural", "fearful", "ordinal"),
    ("face_emotion_xcultural", "fearful", "interval"),
])
def test_pool_alpha_matches_krippendorff_package(dataset: str, question: str, level: str) -> None:
    krippendorff = pytest.importorskip("krippendorff")
    _need({"hs_brexit": "lewidi"}.get(dataset, dataset))
    q = _question(dataset, question, level)
    x_all, y_all = (q.pools[name] for name in q.pairs[0])
    common = panel_module.common_items(x_all, y_all)
    for pool in (x_all, y_all):
        sub = pool.subset_items(common)
        numeric = level == "interval"
        matrix = _reliability_matrix(sub, numeric)  # the subset's item axis is the common items
        domain = sub.category_values if numeric else np.arange(sub.n_categories, dtype=float)
        peer = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level, value_domain=domain)
        assert lg.krippendorff_alpha(sub).value == pytest.approx(peer, abs=1e-10)


def test_hs_brexit_fleiss_and_ac1_match_irrcac() -> None:
    raw = pytest.importorskip("irrCAC.raw")
    _need("lewidi")
    q = _question("hs_brexit", "hate_speech", "nominal")
    for pool in q.pools.values():
        wide = pd.DataFrame(_reliability_matrix(pool, numeric=False).T)  # complete: 3 raters on every item
        cac = raw.CAC(wide, categories=[0.0, 1.0], digits=15)
        fleiss, ac1 = cac.fleiss()["est"]["coefficient_value"], cac.gwet()["est"]["coefficient_value"]
        assert lg.fleiss_kappa(pool).value == pytest.approx(fleiss, abs=1e-10)
        assert lg.gwet_ac(pool).value == pytest.approx(ac1, abs=1e-10)


def _brute_force_kappa_x(x: lg.Ratings, y: lg.Ratings, delta: np.ndarray) -> float:
    """Eq. 9-11 by enumerating every cross-replication pair of judgements (no algebraic shortcut)."""
    common = panel_module.common_items(x, y)
    keep_x, keep_y = np.isin(x.item_codes, common), np.isin(y.item_codes, common)
    ix, vx = x.item_codes[keep_x], x.value_codes[keep_x]
    iy, vy = y.item_codes[keep_y], y.value_codes[keep_y]
    pair_d = delta[vx[:, None], vy[None, :]]  # all R x S pairs of judgements
    same = ix[:, None] == iy[None, :]
    r_i = np.bincount(ix, minlength=x.n_items)
    s_i = np.bincount(iy, minlength=y.n_items)
    item_of_pair = np.broadcast_to(ix[:, None], same.shape)[same]
    per_item = np.bincount(item_of_pair, weights=pair_d[same], minlength=x.n_items)
    d_o = sum((r_i[i] + s_i[i]) / (ix.size + iy.size) * per_item[i] / (r_i[i] * s_i[i]) for i in common)
    d_e = pair_d.mean()
    return 1.0 - d_o / d_e


def _krippendorff_ordinal_delta(freq: np.ndarray) -> np.ndarray:
    q = freq.size
    out = np.zeros((q, q))
    for c in range(q):
        for k in range(q):
            lo, hi = min(c, k), max(c, k)
            out[c, k] = (freq[lo:hi + 1].sum() - (freq[c] + freq[k]) / 2.0) ** 2
    return out


@pytest.mark.parametrize(("dataset", "question", "level"), [
    ("hs_brexit", "hate_speech", "nominal"),
    ("face_emotion_xcultural", "sad", "interval"),
    ("face_emotion_xcultural", "sad", "ordinal"),
])
def test_kappa_x_matches_pair_enumeration(dataset: str, question: str, level: str) -> None:
    _need({"hs_brexit": "lewidi"}.get(dataset, dataset))
    q = _question(dataset, question, level)
    x, y = (q.pools[name] for name in q.pairs[0])
    if level == "nominal":
        delta = 1.0 - np.eye(x.n_categories)
    elif level == "interval":
        delta = (x.category_values[:, None] - x.category_values[None, :]) ** 2
    else:  # the core's documented ordinal distance: pooled frequencies of both replications
        freq = np.bincount(np.concatenate([x.value_codes, y.value_codes]), minlength=x.n_categories)
        delta = _krippendorff_ordinal_delta(freq.astype(float))
    expected = _brute_force_kappa_x(x, y, delta)
    assert lg.cross_kappa(x, y).value == pytest.approx(expected, abs=1e-10)


def test_spa_matches_direct_computation() -> None:
    _need("lewidi")
    df = panel_module.load_hs_brexit(ROOT)
    for task in ("hate_speech", "offensive"):
        frame = df[(df["task"] == task) & (df["pool"] == "target")].dropna(subset=["label"])
        counts = frame.groupby(["item_id", "label"]).size().unstack(fill_value=0)
        n = counts.sum(axis=1)
        p_i = (counts * (counts - 1)).sum(axis=1) / (n * (n - 1))
        keep = n >= 2
        expected = float(((n - 1) * p_i)[keep].sum() / (n - 1)[keep].sum())
        pool = _question("hs_brexit", task, "nominal").pools["target"]
        assert lg.spa(pool, "annotations_m1").value == pytest.approx(expected, abs=1e-12)


# ------------------------------------------------------------------ the script itself
def test_script_prints_markdown_tables(capsys: pytest.CaptureFixture[str]) -> None:
    _need("lewidi")
    assert panel_module.main(["--datasets", "hs_brexit", "--n-boot", "50"]) == 0
    out = capsys.readouterr().out
    assert "### hs_brexit" in out
    table = [line for line in out.splitlines() if line.startswith("| hate_speech | nominal |")]
    assert len(table) == 1 and table[0].count("|") == 12


def test_script_skips_when_folder_is_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(panel_module.DATA_ENV, str(tmp_path / "nowhere"))
    assert panel_module.main([]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "No shared data folder" in captured.err
