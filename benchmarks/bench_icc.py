"""ICC end to end: from the same DataFrame (and the same file) to the six ICCs, LabelGate against pingouin.

**Data.** A complete design (``--items`` items x ``--raters`` raters, every rater rates every item: pingouin's
requirement), string ids (``i000123``, ``r03``), interval labels (item + rater effect + noise, rounded to 0.001),
seed 1; written as CSV.

**Routes**, timed paired and interleaved in one process (each round runs every route once, the order reversing every
round; ``bench_routes.paired``), all from the same DataFrame:

* ``labelgate from_long + six ICCs with CIs``: ``Ratings.from_long(frame, level="interval")`` then
  ``icc(r, form, ci=0.95)`` for the six forms (F intervals) — what the user runs;
* ``labelgate six ICCs with CIs, Ratings built`` — the same on a ``Ratings`` built beforehand (the route the
  former "25,000x" claim timed: it excluded building ``Ratings``);
* ``labelgate from_long + six ICCs, points``: the same without intervals, for the hand route;
* pingouin's *usual* route: ``pingouin.intraclass_corr(frame, targets, raters, ratings)`` on the string ids (all six
  forms with F intervals; its only entry point);
* pingouin's *faster* route: the same call after ``pd.factorize`` of both id columns (integer ids: pingouin's
  per-cell ``groupby.apply`` is cheaper on integers);
* the *hand* route a performance-minded user writes: ``DataFrame.pivot`` to items x raters, then the two-way ANOVA
  mean squares in numpy and the six point formulas (Shrout & Fleiss 1979; McGraw & Wong 1996), no intervals.

**Cold**: fresh processes from the CSV file to the numbers (``read_csv`` + the route, imports included), and
``read_csv`` alone, timed from outside (:mod:`timing`). Values are printed side by side (they agree to ~1e-15).

Run: ``python benchmarks/bench_icc.py [--items 1000] [--raters 10] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from bench_routes import paired, time_lines
from timing import paired_processes, process_lines, ratio_line

import labelgate as lg
from labelgate.metrics.icc import FORMS, icc


def complete_design(n_items: int, n_raters: int, seed: int = 1) -> pd.DataFrame:
    """Long table of a complete items x raters design with string ids and interval labels."""
    rng = np.random.default_rng(seed)
    y = (rng.normal(size=(n_items, 1)) + 0.5 * rng.normal(size=(1, n_raters))
         + rng.normal(size=(n_items, n_raters)))
    frame = pd.DataFrame({"item_id": np.repeat([f"i{i:06d}" for i in range(n_items)], n_raters),
                          "rater_id": np.tile([f"r{j:02d}" for j in range(n_raters)], n_items),
                          "label": y.ravel().round(3)})
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)  # arrival order, not sorted


def labelgate_icc(frame: pd.DataFrame, ci: float | None = 0.95) -> list[float]:
    r = lg.Ratings.from_long(frame, level="interval")
    return [float(icc(r, form, ci=ci)) for form in FORMS]


def pingouin_icc(frame: pd.DataFrame) -> list[float]:
    import pingouin as pg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pingouin's and pandas' deprecation warnings
        table = pg.intraclass_corr(frame, targets="item_id", raters="rater_id", ratings="label")
    return [float(v) for v in table["ICC"]]


def pingouin_icc_codes(frame: pd.DataFrame) -> list[float]:
    coded = pd.DataFrame({"item_id": pd.factorize(frame["item_id"])[0], "rater_id": pd.factorize(frame["rater_id"])[0],
                          "label": frame["label"].to_numpy()})
    return pingouin_icc(coded)


def hand_icc(frame: pd.DataFrame) -> list[float]:
    r"""Six point ICCs from the two-way ANOVA mean squares of the items x raters pivot.

    With :math:`MS_R` (items), :math:`MS_C` (raters), :math:`MS_E` (residual), :math:`MS_W` (within items) and
    :math:`k` raters, :math:`n` items: ICC(1) = (MS_R − MS_W)/(MS_R + (k−1) MS_W); ICC(A,1) = (MS_R − MS_E)/(MS_R +
    (k−1) MS_E + k (MS_C − MS_E)/n); ICC(C,1) = (MS_R − MS_E)/(MS_R + (k−1) MS_E); the k-rater forms divide by
    MS_R, MS_R + (MS_C − MS_E)/n and MS_R (McGraw & Wong 1996, table 4).
    """
    y = frame.pivot(index="item_id", columns="rater_id", values="label").to_numpy(float)
    n, k = y.shape
    grand = y.mean()
    ss_r = k * float(((y.mean(axis=1) - grand) ** 2).sum())
    ss_c = n * float(((y.mean(axis=0) - grand) ** 2).sum())
    ss_e = float(((y - grand) ** 2).sum()) - ss_r - ss_c
    ms_r, ms_c = ss_r / (n - 1), ss_c / (k - 1)
    ms_e, ms_w = ss_e / ((n - 1) * (k - 1)), (ss_c + ss_e) / (n * (k - 1))
    return [(ms_r - ms_w) / (ms_r + (k - 1) * ms_w), (ms_r - ms_e) / (ms_r + (k - 1) * ms_e + k * (ms_c - ms_e) / n),
            (ms_r - ms_e) / (ms_r + (k - 1) * ms_e), (ms_r - ms_w) / ms_r, (ms_r - ms_e) / (ms_r + (ms_c - ms_e) / n),
            (ms_r - ms_e) / ms_r]


LG_FULL = "labelgate from_long + six ICCs with CIs"
LG_BUILT = "labelgate six ICCs with CIs, Ratings built"
LG_POINTS = "labelgate from_long + six ICCs, points"
PG_USUAL = "usual: pingouin intraclass_corr (string ids)"
PG_CODES = "faster: pd.factorize ids + pingouin intraclass_corr"
HAND = "hand: pivot + numpy two-way ANOVA, points"


def warm(frame: pd.DataFrame, rounds: int) -> list[str]:
    built = lg.Ratings.from_long(frame, level="interval")
    steps: dict[str, Any] = {
        LG_FULL: lambda: labelgate_icc(frame),
        LG_BUILT: lambda: [float(icc(built, form, ci=0.95)) for form in FORMS],
        LG_POINTS: lambda: labelgate_icc(frame, ci=None),
        PG_USUAL: lambda: pingouin_icc(frame),
        PG_CODES: lambda: pingouin_icc_codes(frame),
        HAND: lambda: hand_icc(frame),
    }
    values = {name: np.asarray(func()) for name, func in steps.items()}
    spread_ = max(float(np.max(np.abs(v - values[LG_FULL]))) for v in values.values())
    lines = [f"  -- six ICCs (1, A1, C1, 1k, Ak, Ck): labelgate {', '.join(f'{v:.6f}' for v in values[LG_FULL])}; "
             f"largest difference between routes {spread_:.1e}"]
    times = paired(steps, rounds)
    lines += time_lines(times, f"{len(frame):,} rows")
    for peer in (PG_USUAL, PG_CODES):
        lines.append(ratio_line(times, peer, LG_FULL, None))
        lines.append(ratio_line(times, peer, LG_BUILT, None))
    lines.append(ratio_line(times, LG_POINTS, HAND, None))
    return lines


_READ = "import pandas as pd\nd = pd.read_csv({path!r})\n"
COLD = {
    "cold: read_csv": _READ,
    "cold: read_csv + labelgate from_long + six ICCs with CIs": _READ + (
        "import labelgate as lg\nfrom labelgate.metrics.icc import FORMS, icc\n"
        "r = lg.Ratings.from_long(d, level='interval')\nv = [float(icc(r, f, ci=0.95)) for f in FORMS]\n"),
    "cold: read_csv + pingouin intraclass_corr": _READ + (
        "import warnings\nimport pingouin as pg\nwarnings.simplefilter('ignore')\n"
        "v = pg.intraclass_corr(d, targets='item_id', raters='rater_id', ratings='label')\n"),
}


def cold(path: Path, rounds: int) -> list[str]:
    commands = {name: [sys.executable, "-c", code.format(path=str(path))] for name, code in COLD.items()}
    times = paired_processes(commands, rounds)
    read, ours, peer = COLD
    return [*process_lines(times), ratio_line(times, peer, ours, None, clock="process"),
            ratio_line(times, ours, read, None, clock="process")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--raters", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.items < 3 or args.raters < 2:
        parser.error("--items must be >= 3 and --raters >= 2")
    frame = complete_design(args.items, args.raters)
    print(f"# bench_icc: complete design {args.items:,} items x {args.raters} raters = {len(frame):,} ratings, "
          f"string ids, {args.rounds} paired rounds; load average at start {os.getloadavg()[0]:.1f}")
    print("[warm: same DataFrame, one process]", flush=True)
    print("\n".join(warm(frame, args.rounds)), flush=True)
    print("[cold: fresh processes, file to numbers]", flush=True)
    with tempfile.TemporaryDirectory(prefix="labelgate-bench-icc-") as tmp:
        path = Path(tmp) / "icc.csv"
        frame.to_csv(path, index=False)
        print("\n".join(cold(path, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
