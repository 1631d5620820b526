"""From a table to the numbers: LabelGate's routes against reading the file and against peer libraries (issue 17).

Run (from the repository root)::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_routes.py            # 10^6 judgements per pool
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_routes.py --quick    # 10^5
    .venv/bin/python benchmarks/bench_routes.py --groups peers --rounds 9
    .venv/bin/python benchmarks/bench_routes.py --groups cold --cold-n 1000000,5000000   # tables of 2*10^6, 10^7

**Data** (``synth.crowd``, the data of ``bench_core.py``): string item ids (``i0123456``) and rater ids
(``w01234``), labels ``1..5``, 2–4 ratings per item, 10^4 raters per pool, two pools of the same items; a
two-rater table for Cohen's κ (every item rated by both raters, agreement 0.7); the items of pool A with exactly
3 ratings for statsmodels (its ``fleiss_kappa`` needs equal counts). Written as CSV and Parquet.

**Method.** Each group runs in a fresh interpreter that reads the files itself. The steps of a comparison run
*paired and interleaved*: every round runs each step once, in an order that reverses every round, so that a
change of load on a shared machine hits both sides of a ratio. A ratio is computed per round (same round, same
load) and reported as the median of the rounds with its spread (min–max); times as median (min–max). CPU time is
``time.process_time`` (all threads of the process), wall time ``time.perf_counter``. Cold figures are fresh
processes started by this script, timed from outside (interpreter start, imports and all: the clock of the 3x
target) and from inside after the imports; ``--cold-n`` runs them on tables of other sizes. The build's peak
memory (RSS growth and tracemalloc peak, the larger) is a ratio to the input DataFrame's size (target 1.5x).

**Peers** run on their *fastest* route — what a performance-minded user writes: ``pd.factorize`` of the ids,
``np.bincount`` into the items x categories count table, then statsmodels ``fleiss_kappa(table)`` or
``krippendorff.alpha(value_counts=table)``; for Cohen's κ, ``pd.factorize`` and the two raters' labels placed
into two arrays by item, then ``sklearn.metrics.cohen_kappa_score`` — and on their *usual* route, the one in
their documentation: statsmodels ``aggregate_raters`` on the items x raters slots, krippendorff on the raters x
items ``reliability_data`` pivot (at 2·10^4 judgements: the pivot is dense), scikit-learn on
``DataFrame.pivot``. The hand routes check nothing (duplicate judgements, missing ids); LabelGate's do.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import synth  # noqa: E402
from bench_core import _frame_bytes, _machine, _rss_run, _traced_peak  # noqa: E402

import labelgate as lg  # noqa: E402
from labelgate.metrics.panel import metrics_panel  # noqa: E402
from labelgate.metrics.spa import WEIGHTINGS  # noqa: E402

Steps = dict[str, Callable[[], Any]]
IDS = ("item_id", "rater_id")


# ============================================================== data
def write_data(n: int, work: Path) -> dict[str, str]:
    both = synth.crowd(n, replications=2, seed=0)
    one = both[both["pool"] == "A"].drop(columns="pool").reset_index(drop=True)
    sizes = one.groupby("item_id")["label"].transform("size")
    rng = np.random.default_rng(1)
    n_items = n // 2
    truth = rng.integers(1, 6, n_items)
    second = np.where(rng.random(n_items) < 0.7, truth, rng.integers(1, 6, n_items))
    items = np.asarray([f"i{k:07d}" for k in rng.permutation(n_items)], dtype=object)
    two_raters = pd.DataFrame({"item_id": np.concatenate([items, items]),
                               "rater_id": np.repeat(["r1", "r2"], n_items),
                               "label": np.concatenate([truth, second])}).sample(frac=1.0, random_state=2)
    frames = {"one": one, "two": both, "three": one[sizes == 3], "cohen": two_raters,
              "small": one.iloc[: max(n // 50, 1000)]}
    files = {}
    for name, frame in frames.items():
        files[name] = str(work / f"{name}.csv")
        frame.to_csv(files[name], index=False)
    files["two_parquet"] = str(work / "two.parquet")
    both.to_parquet(files["two_parquet"], index=False)
    return files


# ============================================================== the routes
def irr_panel(pools: dict[Any, lg.Ratings]) -> Any:
    """The full panel: α, Fleiss, Conger, AC1, percent agreement, six SPAs per pool; κx and normalized κx.

    An older LabelGate (``PYTHONPATH`` pointing at another checkout, for a before/after run) has no
    ``spa_weightings``: its panel and the five other weightings one by one are the same numbers.
    """
    try:
        return metrics_panel(pools, ci=None, spa_weightings=WEIGHTINGS)
    except TypeError:
        panel = metrics_panel(pools, ci=None)
        return panel, [lg.spa(r, w) for r in pools.values() for w in WEIGHTINGS[1:]]


def counts_table(frame: pd.DataFrame) -> np.ndarray:
    """The hand route to the items x categories counts: factorize + bincount."""
    items, _ = pd.factorize(frame["item_id"])
    labels, cats = pd.factorize(frame["label"])
    q = len(cats)
    return np.bincount(items * q + labels, minlength=(int(items.max()) + 1) * q).reshape(-1, q)


def hand_cohen(frame: pd.DataFrame) -> float:
    from sklearn.metrics import cohen_kappa_score

    items, _ = pd.factorize(frame["item_id"])
    raters, _ = pd.factorize(frame["rater_id"])
    labels = frame["label"].to_numpy()
    pair = np.full((2, int(items.max()) + 1), -1, dtype=labels.dtype)
    pair[raters, items] = labels
    both = (pair >= 0).all(axis=0)
    return float(cohen_kappa_score(pair[0, both], pair[1, both]))


def usual_cohen(frame: pd.DataFrame) -> float:
    from sklearn.metrics import cohen_kappa_score

    wide = frame.pivot(index="item_id", columns="rater_id", values="label").dropna()
    return float(cohen_kappa_score(wide.iloc[:, 0], wide.iloc[:, 1]))


def arrow_table(path: str) -> Any:
    """Arrow's CSV reader with the id columns dictionary-encoded as it parses (multithreaded)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    dictionary = pa.dictionary(pa.int32(), pa.string())
    types = {name: dictionary for name in (*IDS, "pool")}
    return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=types))


# ============================================================== measurement
def paired(steps: Steps, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Run the steps round-robin, reversing the order every round; wall and CPU seconds of every run."""
    out: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in steps}
    names = list(steps)
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            steps[name]()
            out[name]["cpu"].append(time.process_time() - cpu)
            out[name]["wall"].append(time.perf_counter() - wall)
    return out


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def time_lines(times: dict[str, dict[str, list[float]]], size: str) -> list[str]:
    return [f"  {name:<58} {size:<14} cpu s {spread(t['cpu'])}   wall s {spread(t['wall'])}"
            for name, t in times.items()]


def limit_line(times: dict[str, dict[str, list[float]]], measured: str, target_s: float, clock: str = "cpu") -> str:
    """An absolute figure against its limit: the median seconds of ``measured`` (and the min–max of its rounds)."""
    values = times[measured][clock]
    mid = statistics.median(values)
    return (f"  LIMIT {measured} ({clock}): {mid:.4f} s ({min(values):.4f}–{max(values):.4f})  "
            f"target <= {target_s:g} s: {'meets' if mid <= target_s else 'MISSES'}")


def ratio_line(times: dict[str, dict[str, list[float]]], measured: str, reference: str, target: float | None,
               clock: str = "cpu") -> str:
    per_round = [a / b for a, b in zip(times[measured][clock], times[reference][clock], strict=True)]
    mid = statistics.median(per_round)
    verdict = "" if target is None else f"  target <= {target:g}x: {'meets' if mid <= target else 'MISSES'}"
    return (f"  RATIO {measured} / {reference} ({clock}): {mid:.2f}x "
            f"({min(per_round):.2f}–{max(per_round):.2f}){verdict}")


# ============================================================== groups (each in a fresh interpreter)
def group_build(files: dict[str, str], rounds: int) -> list[str]:
    frame = pd.read_csv(files["one"])
    numpy_columns = {name: frame[name].to_numpy(dtype=object) for name in IDS} | {"label": frame["label"].to_numpy()}
    table = arrow_table(files["one"])
    size = f"{len(frame):,} rows"
    steps: Steps = {
        "pd.read_csv one.csv": lambda: pd.read_csv(files["one"]),
        "Ratings.from_long(DataFrame)": lambda: lg.Ratings.from_long(frame),
        "from_long(DataFrame) + full panel": lambda: irr_panel({"A": lg.Ratings.from_long(frame)}),
        "Ratings.from_long(dict of numpy object arrays)": lambda: lg.Ratings.from_long(numpy_columns),
        "Arrow CSV reader (dictionary ids) one.csv": lambda: arrow_table(files["one"]),
        "Ratings.from_long(Arrow table, dictionary ids)": lambda: lg.Ratings.from_long(table),
    }
    lines = []
    try:
        lg.Ratings.from_long(table)
    except lg.InputError:  # an older LabelGate (a before/after run) reads no Arrow table
        lines.append("  (this LabelGate does not read Arrow tables: Arrow steps skipped)")
        del steps["Ratings.from_long(Arrow table, dictionary ids)"]
    times = paired(steps, rounds)
    lines += time_lines(times, size)
    lines.append(ratio_line(times, "Ratings.from_long(DataFrame)", "pd.read_csv one.csv", None))
    lines.append(ratio_line(times, "from_long(DataFrame) + full panel", "pd.read_csv one.csv", 3.0))
    lines.append(ratio_line(times, "Ratings.from_long(dict of numpy object arrays)", "Ratings.from_long(DataFrame)",
                            1.5))
    if "Ratings.from_long(Arrow table, dictionary ids)" in times:
        lines.append(ratio_line(times, "Ratings.from_long(Arrow table, dictionary ids)",
                                "Ratings.from_long(DataFrame)", None))
    return lines


def group_pools(files: dict[str, str], rounds: int) -> list[str]:
    frame = pd.read_csv(files["two"])
    pools = lg.ratings_by_pool(frame)
    x = lg.Ratings.from_long(frame[frame["pool"] == "A"])
    y = lg.Ratings.from_long(frame[frame["pool"] == "B"])
    lg.cross_kappa(x, y)  # the first call puts the pair on one item index (cached): warm figures below
    steps: Steps = {
        "pd.read_csv two.csv": lambda: pd.read_csv(files["two"]),
        "ratings_by_pool(DataFrame)": lambda: lg.ratings_by_pool(frame),
        "ratings_by_pool + full panel (2 pools, κx, normalized κx)": lambda: irr_panel(lg.ratings_by_pool(frame)),
    }
    times = paired(steps, rounds)
    lines = time_lines(times, f"{len(frame):,} rows")
    lines.append(ratio_line(times, "ratings_by_pool + full panel (2 pools, κx, normalized κx)",
                            "pd.read_csv two.csv", 3.0))
    warm = paired({"full panel on built pools (warm)": lambda: irr_panel(pools),
                   "cross_kappa, pools of ratings_by_pool": lambda: lg.cross_kappa(pools["A"], pools["B"]),
                   "cross_kappa, separately built Ratings": lambda: lg.cross_kappa(x, y),
                   "normalized_cross_kappa, separately built Ratings": lambda: lg.normalized_cross_kappa(x, y)},
                  rounds)
    lines += time_lines(warm, f"{len(frame):,} rows")
    lines.append(ratio_line(warm, "cross_kappa, separately built Ratings", "cross_kappa, pools of ratings_by_pool",
                            1.5))
    return lines


#: Issue 17's limits on built `Ratings` of 10^6 judgements: every coefficient warm, the whole panel cold (seconds).
COEFFICIENT_WARM_S, PANEL_COLD_S = 0.005, 0.1


def group_metrics(files: dict[str, str], rounds: int) -> list[str]:
    """Each coefficient of the panel warm, and the whole panel cold (the first on fresh `Ratings`), at 10^6
    judgements: one pool of 10^6 (``one.csv``), and two pools of 5·10^5 each on the same items (the items of
    ``two.csv`` with an even number) for κx, normalized κx and the two-pool panel. Paired, interleaved rounds, CPU.
    """
    from labelgate.metrics.panel import SINGLE

    one = pd.read_csv(files["one"])
    both = pd.read_csv(files["two"])
    both = both[both["item_id"].str[1:].astype(int) % 2 == 0].reset_index(drop=True)
    r = lg.Ratings.from_long(one)
    pools = lg.ratings_by_pool(both)
    x, y = pools["A"], pools["B"]
    irr_panel({"A": r})
    irr_panel(pools)  # every statistic a coefficient reads is made: the figures below are warm
    warm: Steps = {f"{metric}, one pool": (lambda f=f: f(r, ci=None)) for metric, f in SINGLE.items()
                   if metric != "spa"}
    warm |= {f"spa {w}, one pool": (lambda w=w: lg.spa(r, w)) for w in WEIGHTINGS}
    warm |= {"cross_kappa, two pools": lambda: lg.cross_kappa(x, y),
             "normalized_cross_kappa, two pools": lambda: lg.normalized_cross_kappa(x, y)}
    times = paired(warm, rounds)
    lines = [f"  {r.n_ratings:,} judgements in one pool; {x.n_ratings + y.n_ratings:,} in two pools "
             f"({x.n_ratings:,} + {y.n_ratings:,}) on {x.n_items:,} items"]
    lines += time_lines(times, "warm")
    lines += [limit_line(times, name, COEFFICIENT_WARM_S) for name in warm]
    # cold: each round builds fresh Ratings (not timed), then times the first panel on them
    cold: dict[str, dict[str, list[float]]] = {"full panel, cold, one pool": {"wall": [], "cpu": []},
                                               "full panel, cold, two pools": {"wall": [], "cpu": []}}
    for round_ in range(rounds):
        order = list(cold) if round_ % 2 == 0 else list(cold)[::-1]
        for name in order:
            fresh = {"A": lg.Ratings.from_long(one)} if name.endswith("one pool") else lg.ratings_by_pool(both)
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            irr_panel(fresh)
            cold[name]["cpu"].append(time.process_time() - cpu)
            cold[name]["wall"].append(time.perf_counter() - wall)
    lines += time_lines(cold, "cold")
    lines += [limit_line(cold, name, PANEL_COLD_S) for name in cold]
    return lines + standard_error_lines(r, x, y, rounds)


def standard_error_lines(r: lg.Ratings, x: lg.Ratings, y: lg.Ratings, rounds: int) -> list[str]:
    """A point estimate against the same with its standard error read (computed on first read, from the per-item
    statistics the point avoids): the ratio is what a caller who never reads ``se`` is spared."""
    calls = {"fleiss_kappa": lambda: lg.fleiss_kappa(r), "krippendorff_alpha": lambda: lg.krippendorff_alpha(r),
             "spa": lambda: lg.spa(r), "normalized_cross_kappa": lambda: lg.normalized_cross_kappa(x, y)}
    steps: Steps = {}
    for name, call in calls.items():
        steps[f"{name}, point estimate"] = call
        steps[f"{name}, se read"] = lambda call=call: call().se
    times = paired(steps, rounds)
    return time_lines(times, "warm") + [ratio_line(times, f"{name}, point estimate", f"{name}, se read", None)
                                        for name in calls]


def group_peers(files: dict[str, str], rounds: int) -> list[str]:
    import krippendorff
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    three, full, small, cohen = (pd.read_csv(files[k]) for k in ("three", "one", "small", "cohen"))
    lines: list[str] = []

    def fleiss_usual() -> float:
        slots = three.sort_values("item_id", kind="stable")["label"].to_numpy().reshape(-1, 3)
        return float(fleiss_kappa(aggregate_raters(slots)[0], method="fleiss"))

    comparisons: list[tuple[str, pd.DataFrame, Steps, str]] = [
        ("Fleiss κ", three, {
            "labelgate from_long + fleiss_kappa": lambda: float(lg.fleiss_kappa(lg.Ratings.from_long(three))),
            "hand: factorize + bincount + statsmodels fleiss_kappa":
                lambda: float(fleiss_kappa(counts_table(three), method="fleiss")),
            "usual: statsmodels aggregate_raters + fleiss_kappa": fleiss_usual}, "hand"),
        ("Krippendorff α", full, {
            "labelgate from_long + krippendorff_alpha": lambda: float(lg.krippendorff_alpha(lg.Ratings.from_long(full))),
            "hand: factorize + bincount + krippendorff value_counts":
                lambda: float(krippendorff.alpha(value_counts=counts_table(full), level_of_measurement="nominal"))},
         "hand"),
        ("Krippendorff α, usual route (dense pivot)", small, {
            "labelgate from_long + krippendorff_alpha (small)":
                lambda: float(lg.krippendorff_alpha(lg.Ratings.from_long(small))),
            "usual: pivot raters x items + krippendorff reliability_data": lambda: float(krippendorff.alpha(
                reliability_data=small.pivot(index="rater_id", columns="item_id", values="label").to_numpy(float),
                level_of_measurement="nominal"))}, "usual"),
        ("Cohen κ (two raters)", cohen, {
            "labelgate from_long + cohen_kappa": lambda: float(lg.cohen_kappa(lg.Ratings.from_long(cohen))),
            "hand: factorize + two label arrays + sklearn cohen_kappa_score": lambda: hand_cohen(cohen),
            "usual: DataFrame.pivot + sklearn cohen_kappa_score": lambda: usual_cohen(cohen)}, "hand"),
    ]
    for title, frame, steps, _ in comparisons:
        values = {name: func() for name, func in steps.items()}
        agree = max(values.values()) - min(values.values())
        lines.append(f"  -- {title}: {len(frame):,} rows; values {', '.join(f'{v:.10f}' for v in values.values())} "
                     f"(spread {agree:.1e})")
        times = paired(steps, rounds)
        lines += time_lines(times, f"{len(frame):,} rows")
        ours, *others = list(steps)
        for other in others:
            target = 0.8 if other.startswith("hand") else None
            lines.append(ratio_line(times, ours, other, target))
    return lines


def group_memory(files: dict[str, str], rounds: int) -> list[str]:
    """Peak memory: RSS growth (glibc mmap threshold fixed by the caller) and the tracemalloc peak."""
    frame = pd.read_csv(files["one"])
    input_bytes = _frame_bytes(frame)
    lines = [f"  input DataFrame (Arrow strings) {input_bytes / 2**20:.0f} MB"]
    steps: Steps = {"pd.read_csv one.csv": lambda: pd.read_csv(files["one"]),
                    "Ratings.from_long(DataFrame)": lambda: lg.Ratings.from_long(frame),
                    "from_long(DataFrame) + full panel": lambda: irr_panel({"A": lg.Ratings.from_long(frame)})}
    peaks: dict[str, dict[str, list[float]]] = {"input DataFrame": {"memory": [input_bytes]}}
    for name, func in steps.items():
        gc.collect()
        rss = _rss_run(func)[0]
        traced = _traced_peak(func) if name != "pd.read_csv one.csv" else None
        peak = max(p for p in (rss, traced) if p is not None)
        peaks[f"peak memory of {name}"] = {"memory": [peak]}
        lines.append(f"  MEMORY {name:<45} peak {peak / 2**20:6.1f} MB = {peak / input_bytes:.3f}x the input "
                     f"(RSS {0 if rss is None else rss / 2**20:.1f} MB, traced "
                     f"{0 if traced is None else traced / 2**20:.1f} MB)")
    lines.append(ratio_line(peaks, "peak memory of Ratings.from_long(DataFrame)", "input DataFrame", 1.5, "memory"))
    return lines


GROUPS: dict[str, Callable[[dict[str, str], int], list[str]]] = {
    "build": group_build, "pools": group_pools, "metrics": group_metrics, "peers": group_peers,
    "memory": group_memory}


# ============================================================== cold processes
_PANEL = f"import sys\nsys.path.insert(0, {str(HERE)!r})\nimport labelgate as lg\nfrom bench_routes import irr_panel\n"
_ARROW = "import pyarrow as pa, pyarrow.csv as c\nt = pa.dictionary(pa.int32(), pa.string())\n"
# name: (imports, work); the work is timed from inside as well, after the imports
COLD = {
    "cold: read_csv(two.csv)": ("import pandas as pd", "d = pd.read_csv({two!r})"),
    "cold: read_csv + ratings_by_pool + full panel": (
        "import pandas as pd\n" + _PANEL,
        "d = pd.read_csv({two!r})\nirr_panel(lg.ratings_by_pool(d))"),
    "cold: Arrow read_csv, dictionary ids": (_ARROW, "d = c.read_csv({two!r}, convert_options=c.ConvertOptions("
                                                    "column_types=dict.fromkeys(['item_id', 'rater_id', 'pool'], t)))"),
    "cold: Arrow read_csv, dictionary ids + ratings_by_pool + full panel": (
        _ARROW + _PANEL,
        "d = c.read_csv({two!r}, convert_options=c.ConvertOptions(column_types=dict.fromkeys("
        "['item_id', 'rater_id', 'pool'], t)))\nirr_panel(lg.ratings_by_pool(d))"),
    "cold: read_csv + ratings_by_pool + full panel, one thread": (
        "import os\nos.environ['LABELGATE_THREADS'] = '1'\nimport pandas as pd\n" + _PANEL,
        "d = pd.read_csv({two!r})\nirr_panel(lg.ratings_by_pool(d))"),
    "cold: read_parquet(two.parquet)": ("import pandas as pd", "d = pd.read_parquet({parquet!r})"),
    "cold: read_parquet + ratings_by_pool + full panel": (
        "import pandas as pd\n" + _PANEL,
        "d = pd.read_parquet({parquet!r})\nirr_panel(lg.ratings_by_pool(d))"),
}
PROBE = "{imports}\nimport time\n_w, _c = time.perf_counter(), time.process_time()\n{work}\n" \
        "print(time.perf_counter() - _w, time.process_time() - _c)"


def write_cold_data(n: int, work: Path) -> dict[str, str]:
    """The two-pool table alone (CSV and Parquet), for the cold processes at another size than the other groups."""
    both = synth.crowd(n, replications=2, seed=0)
    work.mkdir(parents=True, exist_ok=True)
    files = {"two": str(work / "two.csv"), "two_parquet": str(work / "two.parquet")}
    both.to_csv(files["two"], index=False)
    both.to_parquet(files["two_parquet"], index=False)
    return files


def cold(files: dict[str, str], rounds: int, size: str = "") -> list[str]:
    """Fresh processes, interleaved: process wall time (start, imports, work), and the work alone from inside.

    The target (file → every number of the full panel <= 3x reading the file alone) is judged on the clock the
    issue names: the wall time of a whole fresh process, from its start to the numbers (``process``). The same
    ratio timed inside the processes after their imports (``wall``) is printed next to it, without a verdict.
    """
    from timing import bench_env  # (timing imports this module: imported here, once both are loaded)

    env = bench_env()  # one BLAS thread; modules load from their bytecode cache, as in a user's install
    steps = list(COLD)
    names = [f"{name} {size}".rstrip() for name in steps]  # the size in every name: its ratios stay apart
    times: dict[str, dict[str, list[float]]] = {key: {"wall": [], "cpu": [], "process": []} for key in names}
    for round_ in range(rounds):
        for k in range(len(steps)) if round_ % 2 == 0 else reversed(range(len(steps))):
            key, (imports, work) = names[k], COLD[steps[k]]
            code = PROBE.format(imports=imports, work=work.format(two=files["two"], parquet=files["two_parquet"]))
            start = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
            times[key]["process"].append(time.perf_counter() - start)
            wall, cpu = (float(v) for v in out.stdout.split())
            times[key]["wall"].append(wall)
            times[key]["cpu"].append(cpu)
    lines = [f"  {name:<70} process s {spread(t['process'])}   after imports: wall s {spread(t['wall'])}  "
             f"cpu s {spread(t['cpu'])}" for name, t in times.items()]
    # the issue's target: pandas' reader (CSV, Parquet) and then the numbers, against that reader alone. The Arrow
    # reader with dictionary ids is another route a user may take; it reads slower than pandas' at these sizes (one
    # dictionary per block), so its lines are shown without a verdict
    for measured, reference, target in ((names[1], names[0], 3.0), (names[3], names[0], None),
                                        (names[3], names[2], None), (names[6], names[5], 3.0)):
        lines.append(ratio_line(times, measured, reference, target, "process"))
        lines.append(ratio_line(times, measured, reference, None, "wall"))
    # the same route on one thread (LABELGATE_THREADS=1), paired: what the threads of the build and panel give
    lines.append(ratio_line(times, names[1], names[4], None, "process"))
    return lines


# ============================================================== entry point
def run_group(group: str, files: dict[str, str], rounds: int) -> list[str]:
    env = dict(os.environ)
    if group == "memory":  # freed arrays go back to the system: the RSS high-water mark shows each step's peak
        env["MALLOC_MMAP_THRESHOLD_"] = "131072"
    payload = json.dumps({"group": group, "files": files, "rounds": rounds})
    proc = subprocess.run([sys.executable, __file__, "--_worker", payload], capture_output=True, text=True,
                          check=False, env=env)
    if proc.returncode != 0:
        return [f"  {group} FAILED: " + " | ".join(proc.stderr.strip().splitlines()[-3:])]
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, help="judgements per pool (default 10^6; 10^5 with --quick)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=7, help="paired rounds per comparison")
    parser.add_argument("--groups", help="comma-separated subset of: " + ", ".join([*GROUPS, "cold"]))
    parser.add_argument("--cold-n", help="comma-separated judgements per pool of the cold processes' table "
                                         "(default: --n alone), e.g. 1000000,5000000")
    parser.add_argument("--_worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._worker:
        payload = json.loads(args._worker)
        print(json.dumps(GROUPS[payload["group"]](payload["files"], payload["rounds"])))
        return 0
    n = args.n or (100_000 if args.quick else 1_000_000)
    groups = args.groups.split(",") if args.groups else [*GROUPS, "cold"]
    started = time.perf_counter()
    print(f"# bench_routes: {n:,} judgements per pool, {args.rounds} paired rounds; {_machine()}")
    with tempfile.TemporaryDirectory(prefix="labelgate-routes-") as work:
        files = write_data(n, Path(work))
        for group in groups:
            if group != "cold":
                print(f"[{group}]", flush=True)
                print("\n".join(run_group(group, files, args.rounds)), flush=True)
                continue
            for size in [int(v) for v in args.cold_n.split(",")] if args.cold_n else [n]:
                made = time.perf_counter()
                sized = files if size == n else write_cold_data(size, Path(work) / f"cold-{size}")
                print(f"[cold] {2 * size:,} judgements in the file ({size:,} per pool; data written in "
                      f"{time.perf_counter() - made:.0f} s)", flush=True)
                print("\n".join(cold(sized, args.rounds, f"({2 * size:,})")), flush=True)
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
