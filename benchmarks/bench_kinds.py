"""Multi-label sets, text spans and image boxes: building their `Ratings` (and the panel) as a ratio to reading the input.

Usage::

    .venv/bin/python benchmarks/bench_kinds.py       # the issue's sizes, as in make bench (docs/benchmarks.md)
    .venv/bin/python benchmarks/bench_kinds.py --docs 1000 --images 10000 --only spans,boxes   # smaller, quicker

Data (seeded, written as CSV to a temporary directory, read back with ``pd.read_csv`` — the reference of every
ratio):

* **spans**: ``--docs`` documents of 2,000 characters, 20 entities each (4 labels), 3 crowd and 3 trusted raters
  who each mark 80 % of the entities (a row with empty offsets when a rater marks nothing). Measured:
  ``spans_by_pool`` (every character a unit, both pools on one unit index) and the same plus the panel
  (α, Fleiss, Conger, AC1, percent agreement and SPA per pool; κx and normalized κx).
* **boxes**: ``--images`` images with 5 objects each, 3 crowd and 3 trusted raters drawing every object with a
  jitter of 3 % of its size (one in 10 labels flipped). Measured: ``boxes_by_pool`` (the grouping of both pools'
  boxes into objects included) and the same plus the panel.

Before the paired rounds, one untimed run of each kind's build and panel reports their peak memory
(``tracemalloc``: numpy's arrays included) and the size of the unit table.
* **sets**: ``--sets`` judgements (2 crowd and 2 trusted per item) of a set of the 6 labels, as strings joined by ``|``. Measured:
  ``ratings_by_pool(level="set", sep="|")`` and the same plus the panel.

Each comparison is timed in paired, interleaved rounds (``bench_routes.paired``; every timed step starts from the
table read, nothing cached) and printed as ``RATIO`` lines (CPU and wall clocks) for ``benchmarks/run.py``; the CPU
ratios of spans and boxes have targets (:data:`TARGETS`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from bench_routes import paired, ratio_line  # noqa: E402

import labelgate as lg  # noqa: E402
from labelgate.core.spans import spans_by_pool  # noqa: E402
from labelgate.metrics.panel import metrics_panel  # noqa: E402

SPAN_LABELS = np.asarray(["PER", "LOC", "ORG", "MISC"])
BOX_LABELS = np.asarray(["car", "person", "dog"])
#: CPU-time ratio to ``pd.read_csv`` of the input that each step must stay within (docs/benchmarks.md, "Sets, spans
#: and boxes"): spans at 10^4 documents x 2,000 characters x 3+3 raters (1.2*10^8 unit judgements from 9.6*10^5
#: span rows, so a ratio to a small file), boxes at 10^5 images x 5 objects x 3+3 raters.
TARGETS = {"spans_by_pool": 15.0, "spans_by_pool + panel": 90.0, "boxes_by_pool": 10.0,
           "boxes_by_pool + panel": 10.0}
SET_LABELS = np.asarray(list("abcdef"))


def span_table(n_docs: int, seed: int = 0, length: int = 2000, per_doc: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    slot = length // per_doc
    starts = (np.arange(per_doc) * slot)[None, :] + rng.integers(0, slot - 10, size=(n_docs, per_doc))
    ends = starts + rng.integers(2, 9, size=(n_docs, per_doc))
    labels = SPAN_LABELS[rng.integers(SPAN_LABELS.size, size=(n_docs, per_doc))]
    docs = np.char.add("doc", np.arange(n_docs).astype(str))
    frames = []
    for pool, raters in (("crowd", ("c1", "c2", "c3")), ("trusted", ("t1", "t2", "t3"))):
        for rater in raters:
            keep = (rng.random((n_docs, per_doc)) < 0.8).ravel()
            doc = np.repeat(np.arange(n_docs), per_doc)[keep]
            frames.append(pd.DataFrame({"pool": pool, "item_id": docs[doc], "rater_id": rater,
                                        "start": starts.ravel()[keep], "end": ends.ravel()[keep],
                                        "label": labels.ravel()[keep], "length": length}))
            nothing = np.setdiff1d(np.arange(n_docs), doc)
            if nothing.size:
                frames.append(pd.DataFrame({"pool": pool, "item_id": docs[nothing], "rater_id": rater,
                                            "start": np.nan, "end": np.nan, "label": None, "length": length}))
    return pd.concat(frames, ignore_index=True)


def box_table(n_images: int, seed: int = 1, per_image: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = n_images * per_image
    x, y = rng.uniform(0, 80, n), rng.uniform(0, 80, n)
    w, h = rng.uniform(5, 20, n), rng.uniform(5, 20, n)
    label = BOX_LABELS[rng.integers(3, size=n)]
    images = np.char.add("img", (np.arange(n) // per_image).astype(str))
    frames = []
    for pool, raters in (("crowd", ("c1", "c2", "c3")), ("trusted", ("t1", "t2", "t3"))):
        for rater in raters:
            jitter = rng.normal(0, 0.03, size=(4, n))
            flipped = np.where(rng.random(n) < 0.1, BOX_LABELS[rng.integers(3, size=n)], label)
            frames.append(pd.DataFrame({"pool": pool, "item_id": images, "rater_id": rater, "x": x + jitter[0] * w,
                                        "y": y + jitter[1] * h, "width": w * (1 + jitter[2]),
                                        "height": h * (1 + jitter[3]), "label": flipped}))
    return pd.concat(frames, ignore_index=True)


def set_table(n: int, seed: int = 2) -> pd.DataFrame:
    """``n`` judgements, 4 per item: two crowd raters and two trusted raters, each flipping 10 % of the labels."""
    rng = np.random.default_rng(seed)
    items = n // 4
    truth = rng.random((items, SET_LABELS.size)) < 0.25
    member = np.concatenate([truth ^ (rng.random(truth.shape) < 0.1) for _ in range(4)])  # (4 items, 6)
    strings = ["|".join(SET_LABELS[row]) for row in member]
    slot = np.repeat(np.arange(4), items)
    pool = np.where(slot < 2, "crowd", "trusted")
    return pd.DataFrame({"pool": pool, "item_id": np.tile(np.char.add("q", np.arange(items).astype(str)), 4),
                         "rater_id": np.char.add(pool, (slot % 2).astype(str)), "label": strings})


def panel(pools: dict[str, lg.Ratings]) -> object:
    return metrics_panel(pools, ci=None)


def lines(times: dict[str, dict[str, list[float]]], read: str, names: list[str]) -> list[str]:
    out = []
    for name in names:
        for clock in ("cpu", "wall"):
            out.append(ratio_line(times, name, read, TARGETS.get(name) if clock == "cpu" else None, clock))
    return out


def peaks(build: Callable[[], dict[str, lg.Ratings]]) -> tuple[dict[str, lg.Ratings], str]:
    """One untimed build and panel under ``tracemalloc``: the pools, and their peak memory as a line."""
    tracemalloc.start()
    try:
        pools = build()
        built = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        panel(pools)
        measured = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return pools, (f"peak memory (tracemalloc): build {built / 1e9:.2f} GB, build + panel "
                   f"{max(built, measured) / 1e9:.2f} GB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=10_000, help="documents of 2,000 characters x 3+3 raters")
    parser.add_argument("--images", type=int, default=100_000, help="images of 5 boxes x 3+3 raters")
    parser.add_argument("--sets", type=int, default=1_000_000, help="multi-label judgements")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated subset of: spans, boxes, sets")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else {"spans", "boxes", "sets"}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="labelgate-kinds-") as work:
        if "spans" in only:
            path = str(Path(work) / "spans.csv")
            span_table(args.docs).to_csv(path, index=False)
            frame = pd.read_csv(path)
            pools, peak = peaks(lambda: spans_by_pool(frame))
            print(f"[spans] {args.docs:,} documents x 2,000 characters: {len(frame):,} span rows, "
                  f"{sum(r.n_ratings for r in pools.values()):,} unit judgements in 2 pools; {peak}", flush=True)
            del pools
            times = paired({"pd.read_csv spans.csv": lambda: pd.read_csv(path),
                            "spans_by_pool": lambda: spans_by_pool(frame),
                            "spans_by_pool + panel": lambda: panel(spans_by_pool(frame))}, args.rounds)
            print("\n".join(lines(times, "pd.read_csv spans.csv", ["spans_by_pool", "spans_by_pool + panel"])))
        if "boxes" in only:
            path = str(Path(work) / "boxes.csv")
            box_table(args.images).to_csv(path, index=False)
            frame = pd.read_csv(path)
            pools, peak = peaks(lambda: lg.boxes_by_pool(frame))
            print(f"[boxes] {args.images:,} images: {len(frame):,} boxes, {pools['crowd'].n_items:,} objects, "
                  f"{sum(r.n_ratings for r in pools.values()):,} object judgements in 2 pools; {peak}", flush=True)
            del pools
            times = paired({"pd.read_csv boxes.csv": lambda: pd.read_csv(path),
                            "boxes_by_pool": lambda: lg.boxes_by_pool(frame),
                            "boxes_by_pool + panel": lambda: panel(lg.boxes_by_pool(frame))}, args.rounds)
            print("\n".join(lines(times, "pd.read_csv boxes.csv", ["boxes_by_pool", "boxes_by_pool + panel"])))
        if "sets" in only:
            path = str(Path(work) / "sets.csv")
            set_table(args.sets).to_csv(path, index=False)
            frame = pd.read_csv(path, keep_default_na=False)  # an empty cell is the empty set, not missing
            pools = lg.ratings_by_pool(frame, level="set", sep="|")
            print(f"[sets] {len(frame):,} judgements, {pools['crowd'].n_categories} distinct label sets", flush=True)
            times = paired({"pd.read_csv sets.csv": lambda: pd.read_csv(path, keep_default_na=False),
                            "ratings_by_pool(level='set')": lambda: lg.ratings_by_pool(frame, level="set", sep="|"),
                            "set pools + panel": lambda: panel(lg.ratings_by_pool(frame, level="set", sep="|"))},
                           args.rounds)
            print("\n".join(lines(times, "pd.read_csv sets.csv", ["ratings_by_pool(level='set')",
                                                                   "set pools + panel"])))
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
