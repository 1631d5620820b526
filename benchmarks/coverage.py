"""Empirical coverage of LabelGate's 95% item-bootstrap intervals on data with a known population value.

Run::

    .venv/bin/python benchmarks/coverage.py                      # 1000 runs at 50, 100 and 300 items, every method
    .venv/bin/python benchmarks/coverage.py --runs 200 --items 100 --methods bca --json cov.json
    .venv/bin/python benchmarks/coverage.py --jobs 2 --markdown  # two worker processes; a Markdown table
    .venv/bin/python benchmarks/coverage.py --check-population 200000

Each run draws ``--items`` items from the exchangeable two-replication process
of :func:`synth.exchangeable` (crowd X: 2-4 ratings per item, accuracy 0.70;
trusted Y: 2-3 ratings per item, accuracy 0.85; 4 imbalanced classes), computes
every metric with ``ci=0.95`` and each interval method (``ci_method``: ``bca``,
``delta``, ``percentile``; the same ``seed``, hence the same resamples, for the two
bootstrap methods) and counts how often the interval contains the population value, which is known in closed form
(:func:`synth.population_values`). ``--check-population N`` also estimates the
population values on one sample of ``N`` items, as a check of the closed forms.

Coverage is reported with its Monte-Carlo standard error
``sqrt(c (1 - c) / runs)``; the target of issues 2 and 16 is 93-97 % at 50, 100
and 300 items for each metric's default method (``ci_method="auto"``, see
:func:`labelgate.core.estimate.resolve_ci_method`; marked in the tables). The share of
misses below and above the interval tells whether they are balanced. Runs are seeded per size (``SeedSequence([seed, items])``), so
a cell's figures do not depend on ``--jobs`` or on the other sizes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.append(str(HERE))

import synth  # noqa: E402

import labelgate as lg  # noqa: E402
from labelgate.core.estimate import DEFAULT_CI_METHOD, INTERVAL_METHODS, resolve_ci_method  # noqa: E402

TARGET = (0.93, 0.97)
SIZES = (50, 100, 300)

# (crowd X, trusted Y, ci, n_boot, seed, ci_method) -> Estimate
Metric = Callable[[lg.Ratings, lg.Ratings, float | None, int, int, str], lg.Estimate]

# name -> (call on the two replications, key of the population value)
METRICS: dict[str, tuple[Metric, str]] = {
    "krippendorff_alpha": (lambda x, y, ci, b, s, m: lg.krippendorff_alpha(x, ci=ci, n_boot=b, seed=s, ci_method=m),
                           "krippendorff_alpha"),
    "fleiss_kappa": (lambda x, y, ci, b, s, m: lg.fleiss_kappa(x, ci=ci, n_boot=b, seed=s, ci_method=m),
                     "fleiss_kappa"),
    "conger_kappa": (lambda x, y, ci, b, s, m: lg.conger_kappa(x, ci=ci, n_boot=b, seed=s, ci_method=m),
                     "conger_kappa"),
    "gwet_ac": (lambda x, y, ci, b, s, m: lg.gwet_ac(x, ci=ci, n_boot=b, seed=s, ci_method=m), "gwet_ac"),
    "spa annotations_m1": (lambda x, y, ci, b, s, m: lg.spa(x, ci=ci, n_boot=b, seed=s, ci_method=m), "spa"),
    "spa inv_var_class": (lambda x, y, ci, b, s, m: lg.spa(x, "inv_var_class", ci=ci, n_boot=b, seed=s,
                                                             ci_method=m), "spa"),
    "cross_kappa": (lambda x, y, ci, b, s, m: lg.cross_kappa(x, y, ci=ci, n_boot=b, seed=s, ci_method=m),
                    "cross_kappa"),
    "normalized_cross_kappa": (lambda x, y, ci, b, s, m: lg.normalized_cross_kappa(x, y, ci=ci, n_boot=b, seed=s,
                                                                                   ci_method=m),
                               "normalized_cross_kappa"),
}


@dataclass
class Tally:
    """Coverage counts of one metric, size and interval method."""

    metric: str
    population: float
    items: int = 0
    method: str = INTERVAL_METHODS[0]
    runs: int = 0
    covered: int = 0
    below: int = 0          # population value below the interval
    above: int = 0          # population value above the interval
    undefined: int = 0      # no interval (NaN estimate or too few finite resamples)
    fallback: int = 0       # another method given (details["ci_method_note"]: delta -> BCa -> percentile)
    seconds: float = 0.0    # time in the metric's calls (point, bootstrap, jackknife)
    widths: list[float] = field(default_factory=list)
    estimates: list[float] = field(default_factory=list)

    def add(self, estimate: lg.Estimate, seconds: float = 0.0) -> None:
        self.runs += 1
        self.seconds += seconds
        if estimate.ci is None:
            self.undefined += 1
            return
        if estimate.ci_method != self.method:
            self.fallback += 1
        low, high = estimate.ci
        self.estimates.append(float(estimate.value))
        self.widths.append(high - low)
        if self.population < low:
            self.below += 1
        elif self.population > high:
            self.above += 1
        else:
            self.covered += 1

    def merge(self, other: Tally) -> None:
        """Add the runs of ``other`` (the same cell, other seeds)."""
        for name in ("runs", "covered", "below", "above", "undefined", "fallback", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.widths.extend(other.widths)
        self.estimates.extend(other.estimates)

    @property
    def coverage(self) -> float:
        """Share of runs whose interval covers the population value (undefined count as misses)."""
        return self.covered / self.runs if self.runs else float("nan")

    @property
    def is_default(self) -> bool:
        """True when the cell's method is what ``ci_method="auto"`` (the default) gives the metric."""
        return self.method == default_method(self.metric)

    @property
    def mc_se(self) -> float:
        c = self.coverage
        return math.sqrt(c * (1.0 - c) / self.runs) if self.runs else float("nan")

    def summary(self) -> dict[str, Any]:
        return {"metric": self.metric, "items": self.items, "method": self.method, "population": self.population,
                "runs": self.runs, "coverage": self.coverage, "mc_se": self.mc_se, "below": self.below,
                "above": self.above, "undefined": self.undefined, "fallback": self.fallback,
                "ms_per_call": 1000.0 * self.seconds / self.runs if self.runs else float("nan"),
                "mean_width": float(np.mean(self.widths)) if self.widths else float("nan"),
                "bias": float(np.mean(self.estimates) - self.population) if self.estimates else float("nan"),
                "sd_estimate": float(np.std(self.estimates, ddof=1)) if len(self.estimates) > 1 else float("nan"),
                "default": self.is_default, "in_target": TARGET[0] <= self.coverage <= TARGET[1]}


Cell = tuple[str, int, str]  # (metric, items, method)


def default_method(name: str) -> str:
    """The interval method of ``ci_method="auto"`` for a metric of :data:`METRICS`."""
    return resolve_ci_method(DEFAULT_CI_METHOD, METRICS[name][1])


def replications(n_items: int, process: synth.Process, seed: int) -> tuple[lg.Ratings, lg.Ratings]:
    """One simulated pair of replications (X, Y) of ``n_items`` items, sharing one item index."""
    pools = lg.ratings_by_pool(synth.exchangeable(process, n_items, seed=seed))
    return pools["X"], pools["Y"]


def run_seeds(runs: int, n_items: int, seed: int) -> list[int]:
    """The data seeds of ``runs`` runs at ``n_items`` items (independent of the other sizes)."""
    return [int(s) for s in np.random.SeedSequence([seed, n_items]).generate_state(runs)]


def _simulate_part(n_items: int, seeds: list[int], n_boot: int, names: list[str], methods: list[str],
                   process: synth.Process) -> dict[Cell, Tally]:
    truth = synth.population_values(process)
    chosen = {name: list(dict.fromkeys(default_method(name) if m == "auto" else m for m in methods)) for name in names}
    tallies = {(name, n_items, m): Tally(name, truth[METRICS[name][1]], n_items, m)
               for name in names for m in chosen[name]}
    for run_seed in seeds:
        x, y = replications(n_items, process, run_seed)
        for k, name in enumerate(names):
            for method in chosen[name]:  # one seed for every method: paired comparison on the same resamples
                started = time.perf_counter()
                estimate = METRICS[name][0](x, y, 0.95, n_boot, run_seed + k, method)
                tallies[(name, n_items, method)].add(estimate, time.perf_counter() - started)
    return tallies


def simulate(runs: int = 1000, n_items: int | tuple[int, ...] = SIZES, n_boot: int = 1000, seed: int = 0,
             metrics: list[str] | None = None, methods: list[str] | None = None, process: synth.Process | None = None,
             jobs: int = 1, progress: bool = False) -> dict[Cell, Tally]:
    """Coverage of the 95 % intervals of ``metrics`` x ``methods`` over ``runs`` data sets of each size.

    ``jobs > 1`` spreads blocks of runs over worker processes; the figures are the same for any ``jobs``.
    ``"auto"`` in ``methods`` stands for each metric's default method (:func:`default_method`).
    """
    process = process or synth.default_process()
    sizes = (n_items,) if isinstance(n_items, int) else tuple(n_items)
    names = metrics or list(METRICS)
    methods = methods or list(INTERVAL_METHODS)
    block = max(1, min(50, runs // max(1, 2 * jobs)))
    parts = [(size, seeds[start:start + block]) for size in sizes
             for seeds in [run_seeds(runs, size, seed)] for start in range(0, runs, block)]
    tallies: dict[Cell, Tally] = {}
    started = time.perf_counter()

    def collect(result: dict[Cell, Tally], done: int) -> None:
        for cell, tally in result.items():
            if cell in tallies:
                tallies[cell].merge(tally)
            else:
                tallies[cell] = tally
        if progress and done % max(1, len(parts) // 10) == 0:
            print(f"  {done}/{len(parts)} blocks of runs, {time.perf_counter() - started:.0f} s", file=sys.stderr,
                  flush=True)

    if jobs <= 1:
        for done, (size, seeds) in enumerate(parts, 1):
            collect(_simulate_part(size, seeds, n_boot, names, methods, process), done)
    else:
        with ProcessPoolExecutor(jobs) as pool:
            futures = [pool.submit(_simulate_part, size, seeds, n_boot, names, methods, process)
                       for size, seeds in parts]
            for done, future in enumerate(futures, 1):
                collect(future.result(), done)
    order = {name: i for i, name in enumerate(names)}
    rank = {m: i for i, m in enumerate(INTERVAL_METHODS)}
    return dict(sorted(tallies.items(), key=lambda kv: (order[kv[0][0]], kv[0][1], rank[kv[0][2]])))


def check_population(n_items: int, seed: int = 1, process: synth.Process | None = None) -> dict[str, Any]:
    """Closed-form population values next to the estimates on one sample of ``n_items`` items."""
    process = process or synth.default_process()
    truth = synth.population_values(process)
    x, y = replications(n_items, process, seed)
    out = {}
    for name, (call, key) in METRICS.items():
        out[name] = {"closed_form": truth[key], "large_sample": float(call(x, y, None, 2, 0, DEFAULT_CI_METHOD).value)}
    return out


def report(tallies: dict[Cell, Tally], runs: int, n_boot: int, seconds: float) -> str:
    """Plain-text table: one row per metric x size x method."""
    lines = [f"95% item-bootstrap intervals: {runs} runs per size, n_boot={n_boot} ({seconds:.0f} s); "
             f"target coverage {TARGET[0]:.0%}-{TARGET[1]:.0%}", "",
             f"{'metric':<24} {'items':>5} {'method':<10} {'population':>10} {'coverage':>8} {'MC s.e.':>7} "
             f"{'miss <':>6} {'miss >':>6} {'undef':>5} {'width':>6} {'ms/call':>7}  in target"]
    for t in tallies.values():
        s = t.summary()
        lines.append(f"{t.metric:<24} {t.items:>5} {t.method:<10} {s['population']:>10.4f} {s['coverage']:>8.3f} "
                     f"{s['mc_se']:>7.3f} {s['below']:>6} {s['above']:>6} {s['undefined']:>5} "
                     f"{s['mean_width']:>6.3f} {s['ms_per_call']:>7.1f}  {'yes' if s['in_target'] else 'NO'}"
                     f"{'  (default)' if t.is_default else ''}")
    return "\n".join(lines)


def markdown(tallies: dict[Cell, Tally], methods: list[str]) -> str:
    """Markdown table for docs/benchmarks.md: one row per metric x size, one coverage column per method.

    The default method's cells (``ci_method="auto"``) are in bold; "out" marks a coverage outside the target.
    """
    cells: dict[tuple[str, int], dict[str, Tally]] = {}
    for (name, size, method), tally in tallies.items():
        cells.setdefault((name, size), {})[method] = tally
    present = {t.method for t in tallies.values()}  # "auto" is stored as each metric's method
    methods = [m for m in INTERVAL_METHODS if m in present or (m in methods and "auto" not in methods)]
    head = " | ".join(f"{m} coverage (MC s.e.) | {m} misses < / >" for m in methods)
    lines = [f"| metric | items | {head} | width {' / '.join(methods)} |",
             "| --- | --- |" + " --- | --- |" * len(methods) + " --- |"]
    for (name, size), by_method in cells.items():
        parts = []
        for m in methods:
            if m not in by_method:
                parts.append("— | —")
                continue
            t = by_method[m]
            mark = "" if TARGET[0] <= t.coverage <= TARGET[1] else " out"
            cell = f"{t.coverage:.3f} ({t.mc_se:.3f}){mark}"
            parts.append(f"**{cell}** | **{t.below} / {t.above}**" if t.is_default else f"{cell} | {t.below} / {t.above}")
        widths = " / ".join(f"{np.mean(by_method[m].widths):.3f}" if m in by_method else "—" for m in methods)
        lines.append(f"| {name} | {size} | {' | '.join(parts)} | {widths} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Coverage of LabelGate's bootstrap intervals.")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--items", default=",".join(map(str, SIZES)), help="comma-separated sizes (default 50,100,300)")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metrics", help="comma-separated subset of: " + ", ".join(METRICS))
    parser.add_argument("--methods", default=",".join(INTERVAL_METHODS),
                        help="comma-separated interval methods (default: " + ",".join(INTERVAL_METHODS) + ")")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--markdown", action="store_true", help="also print the Markdown table of docs/benchmarks.md")
    parser.add_argument("--check-population", type=int, metavar="N", help="also estimate on one sample of N items")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    names = args.metrics.split(",") if args.metrics else None
    methods = args.methods.split(",")
    sizes = tuple(int(v) for v in args.items.split(","))
    started = time.perf_counter()
    tallies = simulate(args.runs, sizes, args.n_boot, args.seed, names, methods, jobs=args.jobs, progress=True)
    seconds = time.perf_counter() - started
    print(report(tallies, args.runs, args.n_boot, seconds))
    if args.markdown:
        print("\n" + markdown(tallies, methods))
    result: dict[str, Any] = {"runs": args.runs, "items": list(sizes), "n_boot": args.n_boot, "seed": args.seed,
                              "methods": methods, "seconds": seconds,
                              "process": {k: np.asarray(v).tolist() for k, v in asdict(synth.default_process()).items()},
                              "metrics": [t.summary() for t in tallies.values()]}
    if args.check_population:
        result["population_check"] = check_population(args.check_population)
        print(f"\nPopulation values, closed form vs one sample of {args.check_population:,} items:")
        for name, pair in result["population_check"].items():
            print(f"  {name:<26} {pair['closed_form']:.4f}  {pair['large_sample']:.4f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    judged = [t for t in tallies.values() if t.is_default] or list(tallies.values())
    return 0 if all(TARGET[0] <= t.coverage <= TARGET[1] for t in judged) else 1


if __name__ == "__main__":
    sys.exit(main())
