"""Benchmark of the LabelGate metrics core against the issue-2 targets and the peer libraries.

Run::

    .venv/bin/python benchmarks/bench_core.py               # 10^6 judgements per replication (~5-10 min)
    .venv/bin/python benchmarks/bench_core.py --quick       # 10^5, smaller peers (~1 min)
    .venv/bin/python benchmarks/bench_core.py --json out.json --profile

Synthetic crowd data (``synth.crowd``: string ids, 5 categories, 2-4 ratings per
item, 10^4 raters per replication, two replications of the same items) are
written as CSV to a temporary directory. Every group of steps runs in its own
subprocess (address space capped by ``--mem-limit-gb``) that reads the CSV
itself, so that peak memory is measured per step: the kernel's RSS high-water
mark is reset (``/proc/self/clear_refs``) before each step, and the step's peak
is ``VmHWM - VmRSS`` at its start (tracemalloc when /proc is unavailable).
Times are the best of ``--repeat`` runs; metrics are timed *warm* (the
``Ratings`` caches built by a first call). Ratios are taken between numbers
measured in the same run, which is what the targets are about: absolute
times on a shared machine are noisy.

Targets (issue 2), checked in :data:`TARGETS`:

* building ``Ratings`` plus alpha, Fleiss, Conger, AC1, kappa_x, normalized
  kappa_x and the six SPA weightings <= 3x ``pd.read_csv`` of the same file;
* each metric on a built ``Ratings`` <= 50 ms at 10^6 judgements;
* 1,000 bootstrap resamples of kappa_x on 10^5 common items <= 3 s;
* peak memory of every step <= 3x the input DataFrame (``memory_usage(deep=True)``);
  no step grows with raters x items (same data with 10^3 and 10^5 raters).

With ``--quick`` the data are 10x smaller and the absolute time targets are
scaled linearly with the size (flagged "scaled" in the table).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import synth  # noqa: E402

import labelgate as lg  # noqa: E402

TARGETS = {
    "panel_x_read_csv": 3.0,       # end-to-end panel time / pd.read_csv time of the same file
    "metric_seconds": 0.050,       # each metric on a built Ratings, at 10^6 judgements
    "metric_reference_n": 1_000_000,
    "bootstrap_seconds": 3.0,      # 1,000 resamples of kappa_x on 10^5 common items
    "bootstrap_reference_items": 100_000,
    "peak_x_input": 3.0,           # step peak memory / input DataFrame memory
    "raters_growth_max": 2.0,      # peak(10^5 raters) / peak(10^3 raters) on the same number of judgements
}

SPA_WEIGHTINGS = ("flat", "annotations", "annotations_m1", "edges", "inv_var", "inv_var_class")


# ============================================================== configuration
@dataclass
class Config:
    n: int = 1_000_000                 # judgements per replication
    raters: int = 10_000
    boot_items: int = 100_000
    n_boot: int = 1000
    kripp_n: int = 100_000             # krippendorff pivot route (dense raters x items)
    irrcac_n: int = 10_000             # irrCAC (dense items x raters, Python loop in conger)
    scaling_n: int = 200_000           # memory vs raters check
    repeat: int = 3
    seed: int = 20240611
    quick: bool = False
    profile: bool = False
    peers: bool = True
    memory: bool = True
    mem_limit_gb: float = 10.0
    workdir: str = ""

    @classmethod
    def quick_config(cls) -> Config:
        return cls(n=100_000, boot_items=10_000, kripp_n=10_000, irrcac_n=3_000, scaling_n=50_000, quick=True)


@dataclass
class Row:
    """One line of the report."""

    group: str
    step: str
    seconds: float | None = None
    cpu_seconds: float | None = None
    times: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)
    peak_bytes: float | None = None
    rss_peak_bytes: float | None = None
    traced_peak_bytes: float | None = None
    input_bytes: float | None = None
    size: str = ""
    value: float | None = None
    peer: str | None = None
    peer_seconds: float | None = None
    peer_value: float | None = None
    x_read_csv: float | None = None
    x_read_csv_cpu: float | None = None
    target: str = ""
    status: str = ""
    status_cpu: str = ""
    note: str = ""
    profile: list[str] = field(default_factory=list)


# ============================================================== data
def write_data(cfg: Config) -> dict[str, str]:
    """Generate every data set once and write the CSV files; returns name -> path."""
    out = Path(cfg.workdir)
    files: dict[str, str] = {}

    def save(name: str, frame: pd.DataFrame) -> None:
        path = out / f"{name}.csv"
        frame.to_csv(path, index=False)
        files[name] = str(path)

    both = synth.crowd(cfg.n, n_raters=cfg.raters, replications=2, seed=cfg.seed)
    save("two", both)
    save("one", both[both["pool"] == "A"])
    del both
    save("boot", synth.crowd(3 * cfg.boot_items, n_raters=cfg.raters, replications=2, seed=cfg.seed + 1))
    save("kripp", synth.crowd(cfg.kripp_n, n_raters=cfg.raters, seed=cfg.seed + 2))
    save("irrcac", synth.crowd(cfg.irrcac_n, n_raters=cfg.raters, seed=cfg.seed + 3))
    for raters in (1_000, 100_000):
        save(f"scale_{raters}", synth.crowd(cfg.scaling_n, n_raters=raters, seed=cfg.seed + 4))
    return files


# ============================================================== measurement (inside a worker)
def _proc_status() -> dict[str, int]:
    values: dict[str, int] = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, rest = line.split(":", 1)
                values[key] = int(rest.split()[0]) * 1024
    return values


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


class Meter:
    """Times steps (mode "time") or measures their peak memory (mode "memory").

    The two modes run in separate worker processes: the memory worker runs with a
    fixed glibc mmap threshold, so that every freed large array goes back to the
    system and the RSS high-water mark of a step is not hidden by recycled heap;
    that setting costs page faults (30-60 % slower numpy code), so it never
    applies to the timing worker. Peak memory is the larger of the RSS growth
    during one run (``VmHWM - VmRSS`` at its start, after resetting the
    high-water mark) and the tracemalloc peak of a second run (numpy reports
    its buffers to tracemalloc).
    """

    def __init__(self, repeat: int, profile: bool, mode: str = "time") -> None:
        self.repeat = repeat
        self.profile = profile
        self.mode = mode
        self.rows: list[Row] = []

    def run(self, group: str, step: str, func: Callable[[], Any], *, input_bytes: float | None = None,
            size: str = "", repeat: int | None = None, trace: bool = True) -> Any:
        """Measure one step; returns the result of its first run."""
        return self.interleave(group, [Step(step, func, input_bytes, size)], repeat=repeat, trace=trace)[0]

    def interleave(self, group: str, steps: list[Step], *, repeat: int | None = None,
                   trace: bool = True) -> list[Any]:
        """Measure several steps round-robin (a b a b ...), so that a ratio between them is not
        biased by the load of the machine drifting between two separate series of runs."""
        rows = [Row(group=group, step=st.name, input_bytes=st.input_bytes, size=st.size) for st in steps]
        results = []
        if self.mode == "memory":
            trace = trace and group != "peer"  # peers: RSS only (tracing pandas pivots is very slow)
            for st, row in zip(steps, rows, strict=True):
                gc.collect()
                row.rss_peak_bytes, result, wall, cpu = _rss_run(st.func)
                row.times, row.cpu_times = [wall], [cpu]
                row.traced_peak_bytes = _traced_peak(st.func) if trace else None
                peaks = [p for p in (row.rss_peak_bytes, row.traced_peak_bytes) if p is not None]
                row.peak_bytes = max(peaks) if peaks else None
                results.append(result)
        else:
            for round_ in range(repeat or self.repeat):
                for st, row in zip(steps, rows, strict=True):
                    gc.collect()
                    result, wall, cpu = _timed(st.func)
                    row.times.append(wall)
                    row.cpu_times.append(cpu)
                    if round_ == 0:
                        results.append(result)
            if self.profile:
                for st, row in zip(steps, rows, strict=True):
                    row.profile = _profile(st.func)
        for row, result in zip(rows, results, strict=True):
            row.seconds, row.cpu_seconds = min(row.times), min(row.cpu_times)
            row.value = _as_float(result)
        self.rows += rows
        return results


@dataclass
class Step:
    name: str
    func: Callable[[], Any]
    input_bytes: float | None = None
    size: str = ""


def _timed(func: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = func()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def _rss_run(func: Callable[[], Any]) -> tuple[float | None, Any, float, float]:
    """(RSS growth during the call or None without /proc, result, wall seconds, CPU seconds)."""
    measured = _reset_peak()
    before = _proc_status()["VmRSS"] if measured else 0
    wall, cpu = time.perf_counter(), time.process_time()
    result = func()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = float(_proc_status()["VmHWM"] - before) if measured else None
    return peak, result, wall, cpu


def _traced_peak(func: Callable[[], Any]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        func()
        return float(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


def _profile(func: Callable[[], Any], top: int = 12) -> list[str]:
    profiler = cProfile.Profile()
    profiler.enable()
    func()
    profiler.disable()
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    lines = []
    for (filename, line, name), (_, ncalls, tottime, cumtime, _) in sorted(
            stats.stats.items(), key=lambda kv: -kv[1][2])[:top]:  # type: ignore[attr-defined]
        short = filename.replace(str(HERE.parent) + os.sep, "")
        lines.append(f"{tottime * 1e3:8.1f} ms self {cumtime * 1e3:8.1f} ms cum {ncalls:>7} x {short}:{line}({name})")
    return lines


def _as_float(result: Any) -> float | None:
    if isinstance(result, lg.Estimate):
        return float(result.value)
    if isinstance(result, (float, int, np.floating)):
        return float(result)
    return None


def _frame_bytes(frame: pd.DataFrame) -> float:
    return float(frame.memory_usage(deep=True).sum())


# ============================================================== the steps (one function per group)
def irr_panel(r: lg.Ratings) -> None:
    """alpha, Fleiss, Conger, AC1 and the six SPA weightings on one replication."""
    lg.krippendorff_alpha(r)
    lg.fleiss_kappa(r)
    lg.conger_kappa(r)
    lg.gwet_ac(r)
    for weighting in SPA_WEIGHTINGS:
        lg.spa(r, weighting)


def panel_one(frame: pd.DataFrame) -> None:
    """End to end, one replication: from_long + the IRR panel."""
    irr_panel(lg.Ratings.from_long(frame))


def panel_two(frame: pd.DataFrame) -> None:
    """End to end, two replications: ratings_by_pool + IRR panel on both pools + kappa_x + normalized kappa_x."""
    pools = lg.ratings_by_pool(frame)
    x, y = pools["A"], pools["B"]
    irr_panel(x)
    irr_panel(y)
    lg.cross_kappa(x, y)
    lg.normalized_cross_kappa(x, y)


def group_end_to_end(cfg: Config, files: dict[str, str], meter: Meter) -> None:
    """read_csv, building the Ratings and the end-to-end panel, interleaved run by run, per file.

    Two read_csv references: pandas' default (Arrow-backed strings when pyarrow is installed) and
    Python-object strings (pandas < 3 behaviour, the issue's "about 0.3 s" reference point).
    """
    plan = (("one", "Ratings.from_long (one)", lg.Ratings.from_long, "end-to-end one replication", panel_one),
            ("two", "ratings_by_pool (two)", lg.ratings_by_pool, "end-to-end two replications", panel_two))
    objects = {c: object for c in ("item_id", "rater_id", "pool")}
    for name, build_name, build, panel_name, panel in plan:
        frame = pd.read_csv(files[name])
        size, rows = _frame_bytes(frame), f"{len(frame):,} rows"
        meter.interleave("e2e", [
            Step(f"pd.read_csv {name}.csv", lambda n=name: pd.read_csv(files[n]), None, rows),
            Step(f"pd.read_csv {name}.csv, object strings", lambda n=name: pd.read_csv(files[n], dtype=objects),
                 None, rows),
            Step(build_name, lambda f=frame, b=build: b(f), size, rows),
            Step(panel_name, lambda f=frame, p=panel: p(f), size, rows)])
        read, read_obj, *others = meter.rows[-4:]
        for row in others:
            row.x_read_csv = row.seconds / read.seconds if row.seconds and read.seconds else None
            row.x_read_csv_cpu = (row.cpu_seconds / read.cpu_seconds if row.cpu_seconds and read.cpu_seconds
                                  else None)
            if row.seconds and read_obj.seconds:
                row.note = f"{row.seconds / read_obj.seconds:.2f}x read_csv with object strings"
        del frame


def metric_steps(r: lg.Ratings, r_ord: lg.Ratings, r_int: lg.Ratings, x: lg.Ratings, y: lg.Ratings,
                 x_ord: lg.Ratings, y_ord: lg.Ratings) -> list[tuple[str, Callable[[], Any], bool]]:
    """(name, call, uses both replications) for every metric, timed on built Ratings."""
    steps: list[tuple[str, Callable[[], Any], bool]] = [
        ("percent_agreement", lambda: lg.percent_agreement(r), False),
        ("bennett_s", lambda: lg.bennett_s(r), False),
        ("fleiss_kappa", lambda: lg.fleiss_kappa(r), False),
        ("conger_kappa", lambda: lg.conger_kappa(r), False),
        ("gwet_ac (AC1)", lambda: lg.gwet_ac(r), False),
        ("gwet_ac quadratic (AC2)", lambda: lg.gwet_ac(r, "quadratic"), False),
        ("krippendorff_alpha nominal", lambda: lg.krippendorff_alpha(r), False),
        ("krippendorff_alpha ordinal", lambda: lg.krippendorff_alpha(r_ord), False),
        ("krippendorff_alpha interval", lambda: lg.krippendorff_alpha(r_int), False),
        ("janson_olsson_iota", lambda: lg.janson_olsson_iota(r), False),
        ("specific_agreement", lambda: lg.specific_agreement(r), False),
    ]
    steps += [(f"spa {w}", lambda w=w: lg.spa(r, w), False) for w in SPA_WEIGHTINGS]
    steps += [
        ("cross_kappa nominal", lambda: lg.cross_kappa(x, y), True),
        ("cross_kappa ordinal", lambda: lg.cross_kappa(x_ord, y_ord), True),
        ("normalized_cross_kappa (alpha)", lambda: lg.normalized_cross_kappa(x, y), True),
    ]
    return steps


def group_metrics(cfg: Config, files: dict[str, str], meter: Meter) -> None:
    one, two = pd.read_csv(files["one"]), pd.read_csv(files["two"])
    one_bytes, two_bytes = _frame_bytes(one), _frame_bytes(two)
    r = lg.Ratings.from_long(one)
    r_ord = lg.Ratings.from_long(one, level="ordinal")
    r_int = lg.Ratings.from_long(one, level="interval")
    pools = lg.ratings_by_pool(two)
    pools_ord = lg.ratings_by_pool(two, level="ordinal")
    del one, two
    steps = metric_steps(r, r_ord, r_int, pools["A"], pools["B"], pools_ord["A"], pools_ord["B"])
    for name, call, cross in steps:
        call()  # warm: Ratings caches (item_counts, moments, ...) are built by the first call
        meter.run("metric", name, call, input_bytes=two_bytes if cross else one_bytes,
                  size=f"{r.n_ratings:,} judgements" + (" x 2" if cross else ""))


def group_bootstrap(cfg: Config, files: dict[str, str], meter: Meter) -> None:
    frame = pd.read_csv(files["boot"])
    size = _frame_bytes(frame)
    pools = lg.ratings_by_pool(frame)
    x, y = pools["A"], pools["B"]
    n_common = int(((x.ratings_per_item > 0) & (y.ratings_per_item > 0)).sum())
    label = f"{n_common:,} common items"
    lg.cross_kappa(x, y)
    meter.run("bootstrap", f"cross_kappa ci, n_boot={cfg.n_boot}",
              lambda: lg.cross_kappa(x, y, ci=0.95, n_boot=cfg.n_boot, seed=1), input_bytes=size, size=label)
    meter.run("bootstrap", f"normalized_cross_kappa ci, n_boot={cfg.n_boot}",
              lambda: lg.normalized_cross_kappa(x, y, ci=0.95, n_boot=cfg.n_boot, seed=1), input_bytes=size,
              size=label, repeat=1)
    meter.run("bootstrap", f"conger_kappa ci, n_boot={cfg.n_boot}",
              lambda: lg.conger_kappa(x, ci=0.95, n_boot=cfg.n_boot, seed=1), input_bytes=size,
              size=f"{x.n_items:,} items, {x.n_raters:,} raters", repeat=1)


def group_scaling(cfg: Config, files: dict[str, str], meter: Meter) -> None:
    for raters in (1_000, 100_000):
        frame = pd.read_csv(files[f"scale_{raters}"])
        meter.run("scaling", f"from_long + IRR panel + iota, {raters:,} raters",
                  lambda f=frame: _scaling_step(f), input_bytes=_frame_bytes(frame),
                  size=f"{len(frame):,} rows", repeat=1)
        r = lg.Ratings.from_long(frame)
        meter.run("scaling", f"conger_kappa ci n_boot=200, {raters:,} raters",
                  lambda r=r: lg.conger_kappa(r, ci=0.95, n_boot=200, seed=0), input_bytes=_frame_bytes(frame),
                  size=f"{len(frame):,} rows", repeat=1)


def _scaling_step(frame: pd.DataFrame) -> None:
    r = lg.Ratings.from_long(frame)
    irr_panel(r)
    lg.janson_olsson_iota(r)
    lg.janson_olsson_iota(lg.Ratings.from_long(frame, level="interval"))


# ---------------------------------------------------------------- peers
def group_peer_kripp(cfg: Config, files: dict[str, str], meter: Meter) -> None:
    import krippendorff

    frame = pd.read_csv(files["kripp"])
    size = _frame_bytes(frame)

    def pivot_route() -> float:
        matrix = frame.pivot(index="rater_id", columns="item_id", values="label").to_numpy(dtype=float)
        return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"))

    meter.run("peer", "labelgate from_long + alpha", lambda: lg.krippendorff_alpha(lg.Ratings.from_long(frame)),
              input_bytes=size, size=f"{len(frame):,} rows")
    meter.run("peer", "krippendorff pivot + alpha", pivot_route, input_bytes=size, size=f"{len(frame):,} rows",
              repeat=1)
    full = pd.read_csv(files["one"])
    full_size = _frame_bytes(full)

    def counts_route() -> float:
        counts = pd.crosstab(full["item_id"], full["label"]).to_numpy()
        return float(krippendorff.alpha(value_counts=counts, level_of_measurement="nominal"))

    meter.run("peer", "labelgate from_long + alpha (full)",
              lambda: lg.krippendorff_alpha(lg.Ratings.from_long(full)), input_bytes=full_size,
              size=f"{len(full):,} rows")
    meter.run("peer", "krippendorff crosstab + value_counts alpha (full)", counts_route, input_bytes=full_size,
              size=f"{len(full):,} rows")


def group_peer_statsmodels(cfg: Config, files: dict[str, str], meter: Meter) -> None:
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    full = pd.read_csv(files["one"])
    per_item = full.groupby("item_id")["label"].transform("size")
    equal = full[per_item == 3].reset_index(drop=True)  # complete, equal-count subset
    size = _frame_bytes(equal)
    label = f"{len(equal):,} rows (items with 3 ratings)"

    def sm_route() -> float:
        slots = equal.sort_values("item_id", kind="stable")["label"].to_numpy().reshape(-1, 3)
        table, _ = aggregate_raters(slots)
        return float(fleiss_kappa(table, method="fleiss"))

    meter.run("peer", "labelgate from_long + fleiss_kappa (3-rating subset)",
              lambda: lg.fleiss_kappa(lg.Ratings.from_long(equal)), input_bytes=size, size=label)
    meter.run("peer", "statsmodels aggregate_raters + fleiss_kappa", sm_route, input_bytes=size, size=label)
    r = lg.Ratings.from_long(equal)
    slots = equal.sort_values("item_id", kind="stable")["label"].to_numpy().reshape(-1, 3)
    table, _ = aggregate_raters(slots)
    lg.fleiss_kappa(r)
    meter.run("peer", "labelgate fleiss_kappa (built Ratings)", lambda: lg.fleiss_kappa(r), size=label)
    meter.run("peer", "statsmodels fleiss_kappa (built table)", lambda: float(fleiss_kappa(table)), size=label)


def group_peer_irrcac(cfg: Config, files: dict[str, str], meter: Meter) -> None:
    from irrCAC.raw import CAC

    frame = pd.read_csv(files["irrcac"])
    size = _frame_bytes(frame)
    label = f"{len(frame):,} rows"
    cats = sorted(frame["label"].unique().tolist())

    def wide() -> Any:
        return CAC(frame.pivot(index="item_id", columns="rater_id", values="label"), categories=cats, digits=15)

    for name, ours in (("krippendorff", lg.krippendorff_alpha), ("gwet", lg.gwet_ac), ("fleiss", lg.fleiss_kappa),
                       ("conger", lg.conger_kappa)):
        meter.run("peer", f"labelgate from_long + {ours.__name__}", lambda o=ours: o(lg.Ratings.from_long(frame)),
                  input_bytes=size, size=label)
        meter.run("peer", f"irrCAC pivot + CAC.{name}",
                  lambda n=name: getattr(wide(), n)()["est"]["coefficient_value"], input_bytes=size, size=label,
                  repeat=1 if name == "conger" else None)


GROUPS: dict[str, Callable[[Config, dict[str, str], Meter], None]] = {
    "e2e": group_end_to_end,
    "metrics": group_metrics,
    "bootstrap": group_bootstrap,
    "scaling": group_scaling,
    "peer_krippendorff": group_peer_kripp,
    "peer_statsmodels": group_peer_statsmodels,
    "peer_irrcac": group_peer_irrcac,
}


def worker(group: str, cfg: Config, files: dict[str, str], mode: str) -> list[Row]:
    limit = int(cfg.mem_limit_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    meter = Meter(cfg.repeat, cfg.profile, mode)
    try:
        GROUPS[group](cfg, files, meter)
    except MemoryError as exc:
        meter.rows.append(Row(group=group, step="(aborted)", note=f"MemoryError under the {cfg.mem_limit_gb} GB "
                              f"address-space cap: {exc}"))
    return meter.rows


def run_group(group: str, cfg: Config, files: dict[str, str], mode: str = "time") -> list[Row]:
    """Run one group in a fresh interpreter and collect its rows."""
    payload = json.dumps({"group": group, "cfg": asdict(cfg), "files": files, "mode": mode})
    env = dict(os.environ)
    if mode == "memory":
        # A fixed mmap threshold makes glibc return every freed large array to the system, so that the
        # RSS high-water mark of a step is not hidden by heap memory recycled from earlier steps.
        env["MALLOC_MMAP_THRESHOLD_"] = "131072"
    proc = subprocess.run([sys.executable, __file__, "--_worker", payload], capture_output=True, text=True,
                          check=False, env=env)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:]
        return [Row(group=group, step="(failed)", note=" | ".join(tail))]
    return [Row(**row) for row in json.loads(proc.stdout.strip().splitlines()[-1])]


# ============================================================== judging and reporting
def _merge_memory(timed: list[Row], measured: list[Row]) -> None:
    """Copy the peaks of the memory worker onto the rows of the timing worker."""
    peaks = {(r.group, r.step): r for r in measured}
    for row in timed:
        other = peaks.get((row.group, row.step))
        if other is not None:
            row.peak_bytes, row.rss_peak_bytes = other.peak_bytes, other.rss_peak_bytes
            row.traced_peak_bytes = other.traced_peak_bytes
    for other in measured:
        if other.step in ("(failed)", "(aborted)"):
            timed.append(other)


def judge(rows: list[Row], cfg: Config) -> None:
    """PASS/FAIL against :data:`TARGETS` (ratios were filled in by the workers)."""
    scale = cfg.n / TARGETS["metric_reference_n"]
    metric_limit = TARGETS["metric_seconds"] * scale
    boot_limit = TARGETS["bootstrap_seconds"] * cfg.boot_items / TARGETS["bootstrap_reference_items"]
    # With --quick, absolute-time limits are scaled linearly and only indicative (fixed per-call
    # overheads dominate small data): they are shown but not judged.
    scaled = " (scaled, not judged)" if cfg.quick else ""
    for row in rows:
        if row.seconds is None:
            continue
        if row.step.startswith("end-to-end"):
            _check(row, row.x_read_csv, TARGETS["panel_x_read_csv"], f"<= {TARGETS['panel_x_read_csv']:g}x read_csv",
                   cpu_value=row.x_read_csv_cpu)
        elif row.group == "metric":
            _check(row, row.seconds, metric_limit, f"<= {metric_limit * 1e3:.0f} ms{scaled}", judged=not cfg.quick,
                   cpu_value=row.cpu_seconds)
        elif row.group == "bootstrap" and row.step.startswith("cross_kappa"):
            _check(row, row.seconds, boot_limit, f"<= {boot_limit:.2f} s{scaled}", judged=not cfg.quick,
                   cpu_value=row.cpu_seconds)
        _check_memory(row)
    _judge_scaling(rows)
    _attach_peers(rows)


def _check(row: Row, value: float | None, limit: float, text: str, judged: bool = True,
           cpu_value: float | None = None) -> None:
    """Record a target; ``status`` judges wall-clock numbers, ``status_cpu`` the CPU-time ones
    (``cpu_value``; memory checks count for both)."""
    if value is None:
        return
    row.target = text if not row.target else f"{row.target}; {text}"
    if not judged:
        return
    row.status = _merge_status(row.status, value <= limit)
    cpu = value if cpu_value is None else cpu_value
    row.status_cpu = _merge_status(row.status_cpu, cpu <= limit)


def _merge_status(old: str, ok: bool) -> str:
    if old == "FAIL" or not ok:
        return "FAIL"
    return "PASS"


def _check_memory(row: Row) -> None:
    if row.peak_bytes is None or not row.input_bytes or row.group in ("peer", "read"):
        return
    ratio = row.peak_bytes / row.input_bytes
    row.note = (row.note + " " if row.note else "") + f"peak {ratio:.2f}x input"
    _check(row, ratio, TARGETS["peak_x_input"], f"peak <= {TARGETS['peak_x_input']:g}x input")


def _judge_scaling(rows: list[Row]) -> None:
    for prefix in ("from_long + IRR panel + iota", "conger_kappa ci n_boot=200"):
        pair = [r for r in rows if r.group == "scaling" and r.step.startswith(prefix)]
        if len(pair) != 2 or not all(r.peak_bytes for r in pair):
            continue
        growth = pair[1].peak_bytes / max(pair[0].peak_bytes, 1.0)  # type: ignore[operator]
        pair[1].note += f"; peak {growth:.2f}x the 1,000-rater run"
        _check(pair[1], growth, TARGETS["raters_growth_max"], f"peak growth <= {TARGETS['raters_growth_max']:g}x")


PEER_PAIRS = {
    "krippendorff pivot + alpha": "labelgate from_long + alpha",
    "krippendorff crosstab + value_counts alpha (full)": "labelgate from_long + alpha (full)",
    "statsmodels aggregate_raters + fleiss_kappa": "labelgate from_long + fleiss_kappa (3-rating subset)",
    "statsmodels fleiss_kappa (built table)": "labelgate fleiss_kappa (built Ratings)",
    "irrCAC pivot + CAC.krippendorff": "labelgate from_long + krippendorff_alpha",
    "irrCAC pivot + CAC.gwet": "labelgate from_long + gwet_ac",
    "irrCAC pivot + CAC.fleiss": "labelgate from_long + fleiss_kappa",
    "irrCAC pivot + CAC.conger": "labelgate from_long + conger_kappa",
}


def _attach_peers(rows: list[Row]) -> None:
    by = {r.step: r for r in rows}
    for peer, ours in PEER_PAIRS.items():
        if peer in by and ours in by and by[ours].seconds:
            by[ours].peer, by[ours].peer_seconds, by[ours].peer_value = peer, by[peer].seconds, by[peer].value


def _fmt_s(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s"


def report(rows: list[Row], cfg: Config, elapsed: float) -> str:
    out = [f"# LabelGate core benchmark ({'quick' if cfg.quick else 'full'}): n={cfg.n:,} judgements per "
           f"replication, {cfg.raters:,} raters, best of {cfg.repeat}", _machine(), ""]
    header = (f"{'step':<46} {'size':<26} {'wall':>9} {'cpu':>9} {'x read':>6} {'(cpu)':>6} {'peak MB':>7}  "
              f"{'target':<40} wall/cpu")
    out += [header, "-" * len(header)]
    for r in rows:
        if r.peer and r.peer_seconds is not None:
            continue
        peak = f"{max(r.peak_bytes, 0.0) / 2**20:.0f}" if r.peak_bytes is not None else "-"
        ratio = f"{r.x_read_csv:.2f}" if r.x_read_csv is not None else ""
        ratio_cpu = f"{r.x_read_csv_cpu:.2f}" if r.x_read_csv_cpu is not None else ""
        out.append(f"{r.step[:46]:<46} {r.size[:26]:<26} {_fmt_s(r.seconds):>9} {_fmt_s(r.cpu_seconds):>9} "
                   f"{ratio:>6} {ratio_cpu:>6} {peak:>7}  {r.target:<40} {_status(r)}  {r.note}".rstrip())
    out += ["", "Peers (same data, same run; ratio = peer time / LabelGate time)", ""]
    for r in rows:
        if r.peer and r.peer_seconds is not None and r.seconds:
            agree = ""
            if r.value is not None and r.peer_value is not None:
                agree = f"  values {r.value:.6f} vs {r.peer_value:.6f}"
            out.append(f"{r.step:<52} {_fmt_s(r.seconds):>9} | {r.peer:<50} {_fmt_s(r.peer_seconds):>9} "
                       f"{r.peer_seconds / r.seconds:8.1f}x  [{r.size}]{agree}")
    failed = [r for r in rows if r.status == "FAIL" or r.step in ("(failed)", "(aborted)")]
    n_cpu = sum(r.status_cpu == "FAIL" for r in rows)
    out += ["", f"{len(failed)} step(s) miss a target on wall-clock time or failed ({n_cpu} on CPU time; "
                f"status column: wall/cpu when they differ); total wall time {elapsed:.0f} s"]
    for r in failed:
        out.append(f"  {_status(r) or 'FAILED'} {r.group}/{r.step}: {r.target} {r.note}")
        out += [f"      {line}" for line in r.profile]
    return "\n".join(out)


def _status(row: Row) -> str:
    if not row.status:
        return ""
    return row.status if row.status == row.status_cpu else f"{row.status}/{row.status_cpu}"


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            names = [line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")]
        cpu = f"{names[0]} x {len(names)}" if names else cpu
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    try:
        import pyarrow

        arrow = f"pyarrow {pyarrow.__version__}"
    except ImportError:
        arrow = "no pyarrow"
    storage = getattr(pd.Series(["a"]).dtype, "storage", "object")
    return (f"machine: {cpu}; Python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}, "
            f"{arrow} (default string storage: {storage}); load average at start {load:.2f}")


# ============================================================== entry point
def parse(argv: list[str]) -> tuple[argparse.Namespace, Config]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, help="judgements per replication (default 10^6; 10^5 with --quick)")
    parser.add_argument("--quick", action="store_true", help="10x smaller data, scaled time targets")
    parser.add_argument("--repeat", type=int, default=3, help="timing repeats (best of)")
    parser.add_argument("--json", type=Path, help="write all numbers to this file")
    parser.add_argument("--profile", action="store_true", help="cProfile every step; print it for failures")
    parser.add_argument("--no-peers", action="store_true", help="skip krippendorff / statsmodels / irrCAC")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory workers")
    parser.add_argument("--groups", help="comma-separated subset of: " + ", ".join(GROUPS))
    parser.add_argument("--mem-limit-gb", type=float, default=10.0, help="address-space cap per worker")
    parser.add_argument("--_worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cfg = Config.quick_config() if args.quick else Config()
    if args.n:
        cfg.n = args.n
    cfg.repeat, cfg.profile, cfg.mem_limit_gb = args.repeat, args.profile, args.mem_limit_gb
    cfg.peers, cfg.memory = not args.no_peers, not args.no_memory
    return args, cfg


def main(argv: list[str] | None = None) -> int:
    args, cfg = parse(sys.argv[1:] if argv is None else argv)
    if args._worker:
        payload = json.loads(args._worker)
        rows = worker(payload["group"], Config(**payload["cfg"]), payload["files"], payload["mode"])
        print(json.dumps([asdict(r) for r in rows]))
        return 0
    groups = args.groups.split(",") if args.groups else [g for g in GROUPS if cfg.peers or not
                                                          g.startswith("peer")]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="labelgate-bench-") as workdir:
        cfg.workdir = workdir
        files = write_data(cfg)
        rows: list[Row] = []
        for group in groups:
            print(f"... {group}", file=sys.stderr, flush=True)
            timed = run_group(group, cfg, files, "time")
            if cfg.memory:
                _merge_memory(timed, run_group(group, cfg, files, "memory"))
            rows += timed
    judge(rows, cfg)
    text = report(rows, cfg, time.perf_counter() - started)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"config": asdict(cfg), "targets": TARGETS, "machine": _machine(),
                                         "rows": [asdict(r) for r in rows]}, indent=1))
    return 1 if any(r.status == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
