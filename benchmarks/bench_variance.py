"""Benchmarks of the variance-components module (issue 3) and the real-data xCC panel.

Usage::

    .venv/bin/python benchmarks/bench_variance.py            # speed: sparse 1e6, complete vs pingouin, REML
    .venv/bin/python benchmarks/bench_variance.py --quick    # smaller sizes
    .venv/bin/python benchmarks/bench_variance.py --real-data  # rho vs normalized kappa_x on ../shared/data
    .venv/bin/python benchmarks/bench_variance.py --coverage   # bootstrap coverage simulation

Every ratio is measured in the same run on the same data. pingouin and
statsmodels are test-only peers, imported here only. Set
``OPENBLAS_NUM_THREADS=1`` on a loaded machine (small dense factorisations of
the latent fit are much slower with contended BLAS threads).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import labelgate as lg
from labelgate.metrics.icc import FORMS, icc
from labelgate.metrics.variance import item_icc, labeler_icc, variance_components
from labelgate.metrics.xcc import cross_correlation, disattenuated_correlation

DATA = Path(os.environ.get("LABELGATE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best wall time over ``repeat`` runs and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def sparse_data(n_ratings: int, n_raters: int, per_item: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Crossed sparse design: ``per_item`` distinct raters per item, rater activity ~ Zipf-like."""
    rng = np.random.default_rng(seed)
    n_items = n_ratings // per_item
    activity = 1.0 / np.arange(1, n_raters + 1) ** 0.5
    activity /= activity.sum()
    raters = rng.choice(n_raters, size=(n_items, per_item * 2), p=activity)
    # distinct raters per item: take the first per_item unique draws (resample the few short rows)
    rows = []
    for row in raters:
        uniq = list(dict.fromkeys(row.tolist()))
        while len(uniq) < per_item:
            uniq = list(dict.fromkeys([*uniq, int(rng.integers(n_raters))]))
        rows.append(uniq[:per_item])
    rater = np.asarray(rows, dtype=np.int64).ravel()
    item = np.repeat(np.arange(n_items), per_item)
    y = (3.0 + rng.normal(0, 1.0, n_items)[item] + rng.normal(0, 0.5, n_raters)[rater]
         + rng.normal(0, 0.8, item.size))
    return {"item_id": item, "rater_id": rater, "label": np.round(y, 2)}


def bench_sparse(n_ratings: int, n_raters: int, per_item: int, n_boot: int) -> None:
    data = sparse_data(n_ratings, n_raters, per_item)
    t_build, r = timed(lambda: lg.Ratings.from_long(data, level="interval"))
    print(f"\n## Sparse crossed design: {r.n_ratings:,} ratings, {r.n_items:,} items, {r.n_raters:,} raters")
    print(f"Ratings.from_long (not part of the metric): {t_build:.2f} s")
    cold, vc = timed(lambda: variance_components(r))
    warm, _ = timed(lambda: variance_components(r), repeat=3)
    t_lab, lab = timed(lambda: labeler_icc(r), repeat=3)
    t_item, _ = timed(lambda: item_icc(r), repeat=3)
    print(f"variance_components: {cold:.3f} s cold (incl. per-item/per-rater bincounts), {warm:.3f} s warm")
    print(f"labeler_icc: {t_lab:.3f} s, item_icc: {t_item:.3f} s  (target <= 1 s)")
    print(f"estimates: item {vc.item:.4f} (true 1), rater {vc.rater:.4f} (true 0.25), residual {vc.residual:.4f} "
          f"(true 0.64 + rounding); labeler ICC {float(lab):.4f}")
    for resample in ("items_and_raters", "items"):
        t_ci, est = timed(lambda resample=resample: labeler_icc(r, ci=0.95, n_boot=n_boot, seed=0,
                                                                 resample=resample))
        print(f"labeler_icc with {n_boot} bootstrap replicates ({resample}): {t_ci:.1f} s, CI "
              f"[{est.ci[0]:.4f}, {est.ci[1]:.4f}]")
    frame = pd.DataFrame(data)
    complete_items = frame.groupby("item_id").rater_id.nunique() == r.n_raters
    print(f"pingouin on the complete subset: {int(complete_items.sum())} of {r.n_items:,} items are rated by all "
          f"{r.n_raters:,} raters, so pingouin's listwise deletion leaves nothing (and its pivot would need "
          f"{r.n_items * r.n_raters:,} cells): not run.")


def _pingouin_icc(frame: pd.DataFrame) -> pd.DataFrame:
    import pingouin as pg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pg.intraclass_corr(frame, targets="item_id", raters="rater_id", ratings="label")


def bench_complete(n_items: int, n_raters: int, pingouin_budget: float) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n_items, 1)) + 0.5 * rng.normal(size=(1, n_raters)) + rng.normal(size=(n_items, n_raters))
    frame = pd.DataFrame({"item_id": np.repeat(np.arange(n_items), n_raters),
                          "rater_id": np.tile(np.arange(n_raters), n_items), "label": x.ravel()})
    r = lg.Ratings.from_long(frame, level="interval")
    t_ours, _ = timed(lambda: [icc(r, form, ci=0.95) for form in FORMS], repeat=3)
    t_vc, _ = timed(lambda: variance_components(r), repeat=3)
    line = (f"complete {n_items:,} x {n_raters} = {r.n_ratings:,} ratings: labelgate six ICCs with CIs "
            f"{t_ours:.3f} s, variance_components {t_vc:.3f} s")
    if n_items * n_raters <= pingouin_budget:
        t_pg, ref = timed(lambda: _pingouin_icc(frame))
        ours = np.array([float(icc(r, f)) for f in FORMS])
        diff = float(np.max(np.abs(ours - ref["ICC"].to_numpy())))
        line += f"; pingouin intraclass_corr {t_pg:.2f} s (ratio {t_pg / t_ours:.0f}x; max |diff| {diff:.1e})"
    else:
        line += "; pingouin skipped (size above --pingouin-max)"
    print(line)


def bench_reml(sizes: list[int], budget: float) -> None:
    import statsmodels.api as sm

    print("\n## REML (statsmodels MixedLM, crossed variance components) vs moments, same data")
    for n in sizes:
        data = sparse_data(n, max(20, n // 100), 5, seed=2)
        frame = pd.DataFrame(data).assign(g=1)
        r = lg.Ratings.from_long(data, level="interval")
        t_mom, vc = timed(lambda r=r: variance_components(r), repeat=3)

        def fit(frame: pd.DataFrame = frame) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = sm.MixedLM.from_formula("label ~ 1", groups="g", re_formula="0", data=frame,
                                                vc_formula={"item": "0 + C(item_id)", "rater": "0 + C(rater_id)"})
                return model, model.fit(reml=True)

        t_reml, (model, res) = timed(fit)
        reml = dict(zip(model.exog_vc.names, res.vcomp, strict=True))
        print(f"{r.n_ratings:>7,} ratings ({r.n_items:,} items, {r.n_raters} raters): REML {t_reml:7.2f} s, "
              f"moments {t_mom * 1e3:6.2f} ms (ratio {t_reml / t_mom:,.0f}x); item {reml['item']:.3f} vs "
              f"{vc.item:.3f}, rater {reml['rater']:.3f} vs {vc.rater:.3f}, residual {res.scale:.3f} vs "
              f"{vc.residual:.3f}")
        if t_reml > budget:
            print(f"REML exceeded the {budget:.0f} s budget: larger sizes not attempted")
            break


def bench_latent() -> None:
    print("\n## Latent-scale (logistic, Laplace) fit")
    rng = np.random.default_rng(3)
    for n_items, n_raters, per in ((500, 50, 6), (2000, 200, 8), (10_000, 1000, 8)):
        items = np.repeat(np.arange(n_items), per)
        raters = np.concatenate([rng.choice(n_raters, per, replace=False) for _ in range(n_items)])
        eta = -0.3 + rng.normal(0, 1.2, n_items)[items] + rng.normal(0, 0.6, n_raters)[raters]
        y = (rng.random(items.size) < 1 / (1 + np.exp(-eta))).astype(int)
        r = lg.Ratings.from_long({"item_id": items, "rater_id": raters, "label": y})
        t, est = timed(lambda r=r: item_icc(r, scale="latent"))
        print(f"{r.n_ratings:,} ratings, {n_items:,} items, {n_raters:,} raters: {t:.2f} s, latent item ICC "
              f"{est.value:.3f} (true {1.44 / (1.44 + 0.36 + np.pi**2 / 3):.3f}), sd_item "
              f"{np.sqrt(est.details['item_variance']):.3f} (1.2), sd_rater "
              f"{np.sqrt(est.details['rater_variance']):.3f} (0.6)")


def real_data(n_boot: int) -> None:
    if not DATA.is_dir():
        print(f"shared data not found at {DATA}")
        return
    print("\n## rho (parametric normalized xCC) vs normalized kappa_x, 95% bootstrap CIs "
          f"({n_boot} replicates; rho: items and raters resampled, kappa_x: items)")
    print("| data | rho [CI] | normalized kappa_x [CI] | disattenuated r | xCC | kappa_x | ICC_x / ICC_y | "
          "alpha_x / alpha_y |")
    print("|---|---|---|---|---|---|---|---|")

    def row(name: str, x: lg.Ratings, y: lg.Ratings) -> None:
        rho = cross_correlation(x, y, ci=0.95, n_boot=n_boot, seed=0)
        nk = lg.normalized_cross_kappa(x, y, ci=0.95, n_boot=n_boot, seed=0)
        dc = disattenuated_correlation(x, y, seed=0)
        d, k = rho.details, nk.details
        print(f"| {name} | {rho.value:.3f} [{rho.ci[0]:.3f}, {rho.ci[1]:.3f}] | {nk.value:.3f} "
              f"[{nk.ci[0]:.3f}, {nk.ci[1]:.3f}] | {dc.value:.3f} | {d['xcc']:.3f} | {k['cross_kappa']:.3f} | "
              f"{d['icc_x']:.3f} / {d['icc_y']:.3f} | {k['irr_x']:.3f} / {k['irr_y']:.3f} |")

    face = pd.read_csv(DATA / "face_emotion_xcultural" / "face_emotion_xcultural_long.csv.gz")
    for scale in ("happy", "sad", "angry", "fearful", "disgusted", "surprised"):
        pools = lg.ratings_by_pool(face[face.scale == scale], level="ordinal", categories=[0, 1, 2, 3, 4])
        row(f"face_emotion {scale} (Caucasian vs Taiwanese)", pools["caucasian_raters"], pools["taiwanese_raters"])
    lewidi = pd.read_csv(DATA / "lewidi" / "lewidi_long.csv.gz", dtype={"label": str})
    brexit = lewidi[(lewidi.dataset == "HS-Brexit") & lewidi.label.isin(["0", "1"])].copy()
    brexit["label"] = brexit.label.astype(int)
    for task in ("hate_speech", "aggressive", "offensive"):
        pools = lg.ratings_by_pool(brexit[brexit.task == task])
        row(f"HS-Brexit {task} (target vs control)", pools["target"], pools["control"])
    babe = pd.read_csv(DATA / "babe_mbic" / "babe_mbic_long.csv.gz")
    babe = babe[babe.pool.isin(["crowd_mturk", "expert_sg1"]) & babe.label_bias.isin(["Biased", "Non-biased"])]
    babe = babe.assign(bias=(babe.label_bias == "Biased").astype(int))
    pools = lg.ratings_by_pool(babe, pool="pool", value="bias", duplicates="first")
    row("BABE/MBIC bias (crowd vs expert_sg1)", pools["crowd_mturk"], pools["expert_sg1"])
    print("\n## Item / labeler ICC of the BABE/MBIC pools (label_bias as 0/1)")
    print("| pool | item ICC [CI] | labeler ICC [CI] | latent item ICC [CI] | latent labeler ICC | latent fit time |")
    print("|---|---|---|---|---|---|")
    for name, r in pools.items():
        a = item_icc(r, ci=0.95, n_boot=n_boot, seed=0)
        b = labeler_icc(r, ci=0.95, n_boot=n_boot, seed=0)
        t, la = timed(lambda r=r: item_icc(r, scale="latent", ci=0.95, seed=0))
        print(f"| {name} | {a.value:.3f} [{a.ci[0]:.3f}, {a.ci[1]:.3f}] | {b.value:.3f} [{b.ci[0]:.3f}, "
              f"{b.ci[1]:.3f}] | {la.value:.3f} [{la.ci[0]:.3f}, {la.ci[1]:.3f}] | {la.details['labeler_icc']:.3f} "
              f"| {t:.1f} s |")


def coverage(reps: int) -> None:
    """Coverage of 90% intervals of the item / labeler ICC under both bootstrap schemes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_variance import ratings, simulate, sparse_design

    rng = np.random.default_rng(6)
    items, raters = sparse_design(rng, 300, 40)
    truth = np.array([1.0, 0.36, 0.64]) / 2.0
    hits = {s: np.zeros(2) for s in ("items_and_raters", "items")}
    for _ in range(reps):
        r = ratings(items, raters, simulate(rng, items, raters, 1.0, 0.6, 0.8))
        seed = int(rng.integers(1 << 30))
        for scheme in hits:
            vc = variance_components(r, ci=0.9, n_boot=400, seed=seed, resample=scheme)
            hits[scheme] += [vc.ci["item_share"][0] <= truth[0] <= vc.ci["item_share"][1],
                             vc.ci["rater_share"][0] <= truth[1] <= vc.ci["rater_share"][1]]
    print(f"\n## Coverage of nominal 90% intervals, {reps} simulated data sets (300 items, 40 raters, 2-6 "
          "ratings per item, skewed rater effects)")
    for scheme, h in hits.items():
        print(f"{scheme}: item ICC {h[0] / reps:.2f}, labeler ICC {h[1] / reps:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--real-data", action="store_true", help="the real-data panel only")
    parser.add_argument("--coverage", type=int, default=0, metavar="REPS", help="coverage simulation only")
    parser.add_argument("--pingouin-max", type=float, default=1e6, help="largest complete design given to pingouin")
    parser.add_argument("--reml-budget", type=float, default=120.0, help="stop REML sizes after a fit this long (s)")
    args = parser.parse_args()
    if args.real_data:
        real_data(n_boot=1000)
        return
    if args.coverage:
        coverage(args.coverage)
        return
    scale = 10 if args.quick else 1
    bench_sparse(1_000_000 // scale, 10_000 // scale, 10, n_boot=200 // (2 if args.quick else 1))
    print("\n## Complete designs: labelgate vs pingouin.intraclass_corr")
    for n_items, n_raters in ((1_000, 10), (10_000, 10), (100_000, 10)):
        if n_items * n_raters <= 1_000_000 // scale:
            bench_complete(n_items, n_raters, args.pingouin_max)
    bench_reml([1_000, 3_000, 10_000, 30_000] if not args.quick else [1_000, 3_000], args.reml_budget)
    bench_latent()


if __name__ == "__main__":
    main()
