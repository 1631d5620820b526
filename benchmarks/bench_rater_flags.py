"""Study of the per-rater judgement: interval coverage, false discovery rate of the flags, spammer recall.

Usage::

    .venv/bin/python benchmarks/bench_rater_flags.py                 # the table of docs/monitoring.md
    .venv/bin/python benchmarks/bench_rater_flags.py --sims 20       # a quick look

Data: the project's generator (:func:`labelgate.pipeline.synth.simulate`) — 5 categories, item difficulty 0.3, a
crowd of ``--raters`` raters with noise 0.2 and 2-4 ratings per item, a trusted pool of 12 raters with noise 0.1 and
3 ratings of every item — with 5 % of the crowd raters planted as spammers (their labels replaced by uniform draws,
as in ``tests/metrics/test_diagnostics.py``), so that every rater's true kappa is known: a spammer's is exactly 0 (its
labels are independent of the item), an honest rater's is the common value measured once on a long simulation
(``--truth-items`` items, 10 raters) and printed with its standard error.

* **Coverage**: the share of 95 % intervals of ``kappa_vs_trusted`` that contain the rater's true kappa, among the
  raters with exactly ``n`` shared items in simulations whose mean workload is ``n`` (5, 10, 20, 50).
* **FDR**: the mean share of honest raters among the raters flagged ``low_agreement`` (0 when none is flagged), at a
  mean workload of 10 items per rater, with the default ``min_agreement`` 0.2 and ``fdr`` 0.10.
* **Recall**: the share of spammers flagged, by mean workload (10, 20, 50, 200), the share of raters the data
  could judge (``judged``) and the median workload (``needs_items``) reported to the raters it could not.

Everything is seeded (``--seed``); one process.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np
import pandas as pd

import labelgate as lg
from labelgate.metrics.diagnostics import rater_diagnostics
from labelgate.pipeline.synth import PoolSpec, Scenario, simulate

CATEGORIES = ("a", "b", "c", "d", "e")
TRUSTED = PoolSpec("trusted", n_raters=12, ratings_per_item=(3, 3), noise=0.1, item_share=1.0)


def scenario(n_items: int, n_raters: int) -> Scenario:
    """The study's job: 5 categories, crowd noise 0.2 (2-4 ratings per item), trusted noise 0.1 on every item."""
    crowd = PoolSpec("crowd", n_raters=n_raters, ratings_per_item=(2, 4), noise=0.2)
    return Scenario(n_items=n_items, categories=CATEGORIES, pools=(crowd, TRUSTED))


def planted(n_items: int, n_raters: int, share: float, seed: int) -> tuple[pd.DataFrame, set[str]]:
    """A simulated job with ``share`` of the crowd raters' labels replaced by uniform draws (the spammers)."""
    df = simulate(scenario(n_items, n_raters), seed=seed)
    rng = np.random.default_rng([seed, 1])
    n_spam = max(1, round(share * n_raters)) if share > 0 else 0
    spammers = {f"crowd-r{k:04d}" for k in rng.choice(n_raters, size=n_spam, replace=False)}
    rows = df["rater_id"].isin(spammers).to_numpy()
    df.loc[rows, "label"] = rng.choice(np.asarray(CATEGORIES, dtype=object), size=int(rows.sum()))
    return df, spammers


def diagnose(df: pd.DataFrame, **options: Any) -> list[dict[str, Any]]:
    pools = lg.ratings_by_pool(df.drop(columns=["timestamp"]), categories=list(CATEGORIES))
    return rater_diagnostics(pools["crowd"], pools["trusted"], **options)


def honest_truth(n_items: int, seed: int) -> tuple[float, float]:
    """The true kappa of an honest rater: mean and standard error over 10 raters of a long simulation."""
    rows = diagnose(planted(n_items, 10, 0.0, seed)[0], ci=None)
    values = np.asarray([r["kappa_vs_trusted"] for r in rows], dtype=np.float64)
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size))


def study(workload: int, sims: int, n_raters: int, share: float, seed: int, truth: float) -> dict[str, float]:
    """Coverage at exactly ``workload`` shared items, FDP, recall and the judged share, averaged over ``sims``."""
    n_items = max(1, round(workload * n_raters / 3.0))  # 3 crowd ratings per item on average
    covered = exact = flagged_spam = n_spam = judged = n_all = 0
    fdp, needs = [], []
    for sim in range(sims):
        df, spammers = planted(n_items, n_raters, share, seed=seed * 100_003 + workload * 1_009 + sim)
        rows = diagnose(df)
        false = true = 0
        for row in rows:
            spam = row["rater_id"] in spammers
            flag = "low_agreement" in row["flags"]
            n_all += 1
            judged += bool(row["judged"])
            if not row["judged"] and row["needs_items"] is not None:
                needs.append(row["needs_items"])
            if spam:
                n_spam += 1
                flagged_spam += flag
                true += flag
            else:
                false += flag
            if row["n_shared_items"] == workload and row["kappa_ci_low"] is not None:
                exact += 1
                target = 0.0 if spam else truth
                covered += row["kappa_ci_low"] <= target <= row["kappa_ci_high"]
        fdp.append(false / (false + true) if false + true else 0.0)
    return {"coverage": covered / exact if exact else math.nan, "n_exact": exact,
            "fdr": float(np.mean(fdp)), "fdr_se": float(np.std(fdp, ddof=1) / math.sqrt(len(fdp))),
            "recall": flagged_spam / n_spam if n_spam else math.nan, "n_spam": n_spam,
            "judged": judged / n_all if n_all else math.nan,
            "needs": float(np.median(needs)) if needs else math.nan}


def _items(value: float) -> str:
    return f"{value:.0f} items" if math.isfinite(value) else "— (every rater judged)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=100, help="simulations per workload")
    parser.add_argument("--raters", type=int, default=200, help="crowd raters per simulation")
    parser.add_argument("--spammers", type=float, default=0.05, help="share of planted spammers")
    parser.add_argument("--truth-items", type=int, default=60_000, help="items of the long simulation")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    truth, se = honest_truth(args.truth_items, args.seed)
    print(f"true kappa of an honest rater: {truth:.4f} (se {se:.4f}); of a spammer: 0")
    print(f"{args.sims} simulations per workload, {args.raters} crowd raters, {args.spammers:.0%} spammers, "
          f"min_agreement 0.2, fdr 0.10, 95 % intervals\n")
    print("| items per rater | coverage of the 95 % intervals (raters at exactly n items) | FDR of low_agreement "
          "(± se) | spammers flagged | raters judged | median workload reported to the others |")
    print("|---|---|---|---|---|---|")
    for workload in (5, 10, 20, 50, 200):
        out = study(workload, args.sims, args.raters, args.spammers, args.seed, truth)
        print(f"| {workload} | {out['coverage']:.3f} ({out['n_exact']:,} raters) | {out['fdr']:.3f} ± "
              f"{out['fdr_se']:.3f} | {out['recall']:.2f} ({out['n_spam']:,}) | {out['judged']:.2f} | "
              f"{_items(out['needs'])} |", flush=True)
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
