"""Empirical coverage of LabelGate's 95% item-bootstrap intervals on data with a known population value.

Run::

    .venv/bin/python benchmarks/coverage.py                      # 1000 runs of 300 items, n_boot=1000
    .venv/bin/python benchmarks/coverage.py --runs 200 --items 100 --json cov.json
    .venv/bin/python benchmarks/coverage.py --check-population 200000

Each run draws ``--items`` items from the exchangeable two-replication process
of :func:`synth.exchangeable` (crowd X: 2-4 ratings per item, accuracy 0.70;
trusted Y: 2-3 ratings per item, accuracy 0.85; 4 imbalanced classes), computes
every metric with ``ci=0.95`` and counts how often the interval contains the
population value, which is known in closed form
(:func:`synth.population_values`). ``--check-population N`` also estimates the
population values on one sample of ``N`` items, as a check of the closed forms.

Coverage is reported with its Monte-Carlo standard error
``sqrt(c (1 - c) / runs)``; the target of issue 2 is 93-97 %. The share of
misses below and above the interval tells whether they are balanced.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.append(str(HERE))

import synth  # noqa: E402

import labelgate as lg  # noqa: E402

TARGET = (0.93, 0.97)

Metric = Callable[[lg.Ratings, lg.Ratings, float | None, int, int], lg.Estimate]

# name -> (call on the two replications, key of the population value)
METRICS: dict[str, tuple[Metric, str]] = {
    "krippendorff_alpha": (lambda x, y, ci, b, s: lg.krippendorff_alpha(x, ci=ci, n_boot=b, seed=s),
                           "krippendorff_alpha"),
    "fleiss_kappa": (lambda x, y, ci, b, s: lg.fleiss_kappa(x, ci=ci, n_boot=b, seed=s), "fleiss_kappa"),
    "conger_kappa": (lambda x, y, ci, b, s: lg.conger_kappa(x, ci=ci, n_boot=b, seed=s), "conger_kappa"),
    "gwet_ac": (lambda x, y, ci, b, s: lg.gwet_ac(x, ci=ci, n_boot=b, seed=s), "gwet_ac"),
    "spa annotations_m1": (lambda x, y, ci, b, s: lg.spa(x, ci=ci, n_boot=b, seed=s), "spa"),
    "spa inv_var_class": (lambda x, y, ci, b, s: lg.spa(x, "inv_var_class", ci=ci, n_boot=b, seed=s), "spa"),
    "cross_kappa": (lambda x, y, ci, b, s: lg.cross_kappa(x, y, ci=ci, n_boot=b, seed=s), "cross_kappa"),
    "normalized_cross_kappa": (lambda x, y, ci, b, s: lg.normalized_cross_kappa(x, y, ci=ci, n_boot=b, seed=s),
                               "normalized_cross_kappa"),
}


@dataclass
class Tally:
    """Coverage counts of one metric."""

    metric: str
    population: float
    runs: int = 0
    covered: int = 0
    below: int = 0          # population value below the interval
    above: int = 0          # population value above the interval
    undefined: int = 0      # no interval (NaN estimate or too few finite resamples)
    widths: list[float] = field(default_factory=list)
    estimates: list[float] = field(default_factory=list)

    def add(self, estimate: lg.Estimate) -> None:
        self.runs += 1
        if estimate.ci is None:
            self.undefined += 1
            return
        low, high = estimate.ci
        self.estimates.append(float(estimate.value))
        self.widths.append(high - low)
        if self.population < low:
            self.below += 1
        elif self.population > high:
            self.above += 1
        else:
            self.covered += 1

    @property
    def coverage(self) -> float:
        """Share of runs whose interval covers the population value (undefined count as misses)."""
        return self.covered / self.runs if self.runs else float("nan")

    @property
    def mc_se(self) -> float:
        c = self.coverage
        return math.sqrt(c * (1.0 - c) / self.runs) if self.runs else float("nan")

    def summary(self) -> dict[str, Any]:
        return {"metric": self.metric, "population": self.population, "runs": self.runs,
                "coverage": self.coverage, "mc_se": self.mc_se, "below": self.below, "above": self.above,
                "undefined": self.undefined,
                "mean_width": float(np.mean(self.widths)) if self.widths else float("nan"),
                "bias": float(np.mean(self.estimates) - self.population) if self.estimates else float("nan"),
                "sd_estimate": float(np.std(self.estimates, ddof=1)) if len(self.estimates) > 1 else float("nan"),
                "in_target": TARGET[0] <= self.coverage <= TARGET[1]}


def replications(n_items: int, process: synth.Process, seed: int) -> tuple[lg.Ratings, lg.Ratings]:
    """One simulated pair of replications (X, Y) of ``n_items`` items, sharing one item index."""
    pools = lg.ratings_by_pool(synth.exchangeable(process, n_items, seed=seed))
    return pools["X"], pools["Y"]


def simulate(runs: int = 1000, n_items: int = 300, n_boot: int = 1000, seed: int = 0,
             metrics: list[str] | None = None, process: synth.Process | None = None,
             progress: bool = False) -> dict[str, Tally]:
    """Coverage of the 95 % intervals of ``metrics`` over ``runs`` simulated data sets."""
    process = process or synth.default_process()
    truth = synth.population_values(process)
    names = metrics or list(METRICS)
    tallies = {name: Tally(name, truth[METRICS[name][1]]) for name in names}
    seeds = np.random.SeedSequence(seed).generate_state(runs)
    started = time.perf_counter()
    for run, run_seed in enumerate(seeds.tolist()):
        x, y = replications(n_items, process, run_seed)
        for k, name in enumerate(names):
            tallies[name].add(METRICS[name][0](x, y, 0.95, n_boot, run_seed + k))
        if progress and (run + 1) % max(1, runs // 10) == 0:
            print(f"  {run + 1}/{runs} runs, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return tallies


def check_population(n_items: int, seed: int = 1, process: synth.Process | None = None) -> dict[str, Any]:
    """Closed-form population values next to the estimates on one sample of ``n_items`` items."""
    process = process or synth.default_process()
    truth = synth.population_values(process)
    x, y = replications(n_items, process, seed)
    out = {}
    for name, (call, key) in METRICS.items():
        out[name] = {"closed_form": truth[key], "large_sample": float(call(x, y, None, 2, 0).value)}
    return out


def report(tallies: dict[str, Tally], runs: int, n_items: int, n_boot: int, seconds: float) -> str:
    lines = [f"95% item-bootstrap percentile intervals: {runs} runs x {n_items} items, n_boot={n_boot} "
             f"({seconds:.0f} s); target coverage {TARGET[0]:.0%}-{TARGET[1]:.0%}", "",
             f"{'metric':<26} {'population':>10} {'coverage':>9} {'MC s.e.':>8} {'miss <':>7} {'miss >':>7} "
             f"{'undef':>5} {'width':>7} {'bias':>8} {'sd':>7}  in target"]
    for t in tallies.values():
        s = t.summary()
        lines.append(f"{t.metric:<26} {s['population']:>10.4f} {s['coverage']:>9.3f} {s['mc_se']:>8.3f} "
                     f"{s['below']:>7} {s['above']:>7} {s['undefined']:>5} {s['mean_width']:>7.3f} "
                     f"{s['bias']:>8.4f} {s['sd_estimate']:>7.4f}  {'yes' if s['in_target'] else 'NO'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Coverage of LabelGate's bootstrap intervals.")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metrics", help="comma-separated subset of: " + ", ".join(METRICS))
    parser.add_argument("--check-population", type=int, metavar="N", help="also estimate on one sample of N items")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    names = args.metrics.split(",") if args.metrics else None
    started = time.perf_counter()
    tallies = simulate(args.runs, args.items, args.n_boot, args.seed, names, progress=True)
    print(report(tallies, args.runs, args.items, args.n_boot, time.perf_counter() - started))
    result: dict[str, Any] = {"runs": args.runs, "items": args.items, "n_boot": args.n_boot, "seed": args.seed,
                              "process": {k: np.asarray(v).tolist() for k, v in asdict(synth.default_process()).items()},
                              "metrics": [t.summary() for t in tallies.values()]}
    if args.check_population:
        result["population_check"] = check_population(args.check_population)
        print(f"\nPopulation values, closed form vs one sample of {args.check_population:,} items:")
        for name, pair in result["population_check"].items():
            print(f"  {name:<26} {pair['closed_form']:.4f}  {pair['large_sample']:.4f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0 if all(t.summary()["in_target"] for t in tallies.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
