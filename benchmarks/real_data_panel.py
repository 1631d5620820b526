"""Worked example on real replicated annotation data: IRR per pool, kappa_x and normalized kappa_x.

Reads the long CSVs under ``../shared/data`` beside the repository (override with the environment
variable ``LABELGATE_SHARED_DATA``) and, for every question and every pair of
rater pools, prints per-pool reliability (Krippendorff's alpha; Fleiss' kappa
and Gwet's AC1 for nominal questions; SPA with ``annotations_m1`` weights),
cross-replication kappa_x and normalized kappa_x (xRR paper eq. 9-13) with
95 % item-bootstrap intervals.

Every per-pool metric is computed on the items rated in *both* pools, so the
table's alpha values are exactly the IRRs inside normalized kappa_x.

Datasets and the choices made for their quirks (see each README):

* ``babe_mbic``: MTurk crowd (MBIC) vs trained experts (BABE SG1), not SG2 (it
  copies SG1 labels). One worker labelled 20 sentences twice under two
  ``survey_record_id`` values; rows are sorted by ``survey_record_id`` and the
  first judgement per (rater, item) is kept, i.e. one whole survey of that
  worker. SG1 rows whose text does not match an MBIC sentence
  (``text_in_mbic == 0``) are dropped. Missing labels are dropped.
* ``hs_brexit`` (LeWiDi 2023): target (Muslim immigrants) vs control pool; the
  three ``offensive`` labels ``"No"`` are treated as missing (ambiguous code).
* ``annotation_sensitivity``: guideline condition A vs each of B-E.
* ``face_emotion_xcultural``: Caucasian vs Taiwanese raters, one question per
  emotion scale, at ordinal and at interval level.
* ``popquorn``: raters who are men vs women (offensiveness 1-5), a sparse
  design where many items have a single rating in a pool.

Run: ``python benchmarks/real_data_panel.py [--n-boot 1000] [--seed 12345] [--datasets babe_mbic ...]``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import labelgate as lg

DATA_ENV = "LABELGATE_SHARED_DATA"
# The issue's ``../shared/data`` next to the repository (as tests/conftest.py).
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DEFAULT_SEED = 12345
DEFAULT_N_BOOT = 1000
CI_LEVEL = 0.95

OPINION_LEVELS = ("Entirely factual", "Somewhat factual but also opinionated", "Expresses writer's opinion")
FACE_SCALES = ("happy", "sad", "angry", "fearful", "disgusted", "surprised")


def data_dir() -> Path:
    """The shared data folder: ``$LABELGATE_SHARED_DATA``, else ``../shared/data`` beside the repository."""
    return Path(os.environ.get(DATA_ENV, str(DEFAULT_DATA)))


def _read(root: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(root / name / f"{name}_long.csv.gz", low_memory=False)


# ------------------------------------------------------------------ loaders
def load_babe_mbic(root: Path | None = None) -> pd.DataFrame:
    """MBIC crowd and BABE SG1 expert rows on the 1,700 MBIC sentences, one row per (rater, item)."""
    df = _read(root or data_dir(), "babe_mbic")
    df = df[df["pool"].isin(["crowd_mturk", "expert_sg1"]) & (df["text_in_mbic"] == 1)]
    # The 20 repeated (worker, sentence) pairs come from one worker's two surveys: keep one whole survey.
    df = df.sort_values("survey_record_id", kind="stable", na_position="last")
    return df.drop_duplicates(["item_id", "rater_id"], keep="first").reset_index(drop=True)


def babe_mbic_duplicates(root: Path | None = None) -> pd.DataFrame:
    """The repeated crowd (worker, sentence) judgements that :func:`load_babe_mbic` removes (both copies)."""
    df = _read(root or data_dir(), "babe_mbic")
    crowd = df[df["pool"] == "crowd_mturk"]
    return crowd[crowd.duplicated(["item_id", "rater_id"], keep=False)]


def load_hs_brexit(root: Path | None = None) -> pd.DataFrame:
    """HS-Brexit rows (3 tasks, target and control pools); label as float, ``"No"`` -> missing."""
    df = _read(root or data_dir(), "lewidi")
    df = df[df["dataset"] == "HS-Brexit"].copy()
    df["label"] = pd.to_numeric(df["label"].where(df["label"] != "No"))
    return df.reset_index(drop=True)


def load_annotation_sensitivity(root: Path | None = None) -> pd.DataFrame:
    """3,000 tweets x 5 guideline conditions (pools A-E); hate_speech, offensive_language 0/1, NaN missing."""
    return _read(root or data_dir(), "annotation_sensitivity")


def load_face_emotion(root: Path | None = None) -> pd.DataFrame:
    """150 faces x 40 raters (two cultural pools) x 6 emotion scales, label 0-4."""
    return _read(root or data_dir(), "face_emotion_xcultural")


def load_popquorn(root: Path | None = None) -> pd.DataFrame:
    """POPQUORN offensiveness 1-5; ``pool`` is the rater's gender."""
    return _read(root or data_dir(), "popquorn_offensiveness")


# ---------------------------------------------------------------- questions
@dataclass(frozen=True)
class Question:
    """One question of one dataset, split into pools, and the pool pairs to compare."""

    dataset: str
    question: str
    level: str
    pools: dict[Any, lg.Ratings]
    pairs: tuple[tuple[Any, Any], ...]


def _split(frame: pd.DataFrame, value: str, level: str, categories: Sequence[Any] | None,
           ) -> dict[Any, lg.Ratings]:
    return lg.ratings_by_pool(frame, pool="pool", item="item_id", rater="rater_id", value=value,
                              level=level, categories=categories, duplicates="error")  # type: ignore[arg-type]


def babe_mbic_questions(root: Path | None = None) -> Iterator[Question]:
    df = load_babe_mbic(root)
    pair = (("crowd_mturk", "expert_sg1"),)
    yield Question("babe_mbic", "label_bias", "nominal", _split(df, "label_bias", "nominal", None), pair)
    yield Question("babe_mbic", "label_opinion", "ordinal",
                   _split(df, "label_opinion", "ordinal", OPINION_LEVELS), pair)


def hs_brexit_questions(root: Path | None = None) -> Iterator[Question]:
    df = load_hs_brexit(root)
    for task in ("hate_speech", "aggressive", "offensive"):
        frame = df[df["task"] == task]
        yield Question("hs_brexit", task, "nominal", _split(frame, "label", "nominal", [0, 1]),
                       (("target", "control"),))


def annotation_sensitivity_questions(root: Path | None = None) -> Iterator[Question]:
    df = load_annotation_sensitivity(root)
    pairs = tuple(("A", other) for other in "BCDE")
    for column in ("hate_speech", "offensive_language"):
        pools = _split(df, column, "nominal", [0, 1])
        yield Question("annotation_sensitivity", column, "nominal", pools, pairs)


def face_emotion_questions(root: Path | None = None) -> Iterator[Question]:
    df = load_face_emotion(root)
    pair = (("caucasian_raters", "taiwanese_raters"),)
    for scale in FACE_SCALES:
        frame = df[df["scale"] == scale]
        for level in ("ordinal", "interval"):
            yield Question("face_emotion_xcultural", scale, level,
                           _split(frame, "label", level, [0, 1, 2, 3, 4]), pair)


def popquorn_questions(root: Path | None = None) -> Iterator[Question]:
    df = load_popquorn(root)
    pair = (("Man", "Woman"),)
    for level in ("ordinal", "interval"):
        yield Question("popquorn", "offensiveness", level, _split(df, "label", level, [1, 2, 3, 4, 5]), pair)


DATASETS: dict[str, Callable[[Path | None], Iterator[Question]]] = {
    "babe_mbic": babe_mbic_questions,
    "hs_brexit": hs_brexit_questions,
    "annotation_sensitivity": annotation_sensitivity_questions,
    "face_emotion_xcultural": face_emotion_questions,
    "popquorn": popquorn_questions,
}


# ------------------------------------------------------------------ metrics
def common_items(x: lg.Ratings, y: lg.Ratings) -> np.ndarray:
    """Codes of the items rated in both pools (the pools share one item index)."""
    return np.flatnonzero((x.ratings_per_item > 0) & (y.ratings_per_item > 0))


def n_rated_items(r: lg.Ratings) -> int:
    """Items with at least one rating (``n_items`` also counts the shared index's unrated items)."""
    return int((r.ratings_per_item > 0).sum())


def _ci(estimate: lg.Estimate) -> tuple[float, float]:
    return estimate.ci if estimate.ci is not None else (math.nan, math.nan)


def _pool_metrics(r: lg.Ratings, prefix: str, nominal: bool) -> dict[str, Any]:
    alpha = lg.krippendorff_alpha(r)
    row: dict[str, Any] = {f"{prefix}_items": n_rated_items(r), f"{prefix}_ratings": r.n_ratings,
                           f"{prefix}_raters": int(np.unique(r.rater_codes).size),
                           f"{prefix}_pairable_items": alpha.n_items, f"{prefix}_alpha": alpha.value,
                           f"{prefix}_spa": lg.spa(r, "annotations_m1").value}
    if nominal:
        row[f"{prefix}_fleiss"] = lg.fleiss_kappa(r).value
        row[f"{prefix}_ac1"] = lg.gwet_ac(r).value
    return row


def pair_row(question: Question, name_x: Any, name_y: Any, *, n_boot: int = DEFAULT_N_BOOT,
             seed: int = DEFAULT_SEED, ci: float | None = CI_LEVEL) -> dict[str, Any]:
    """All numbers of one pool pair of one question (per-pool metrics on the common items)."""
    x_all, y_all = question.pools[name_x], question.pools[name_y]
    common = common_items(x_all, y_all)
    x, y = x_all.subset_items(common), y_all.subset_items(common)
    nominal = question.level == "nominal"
    norm = lg.normalized_cross_kappa(x_all, y_all, irr="krippendorff_alpha", ci=ci, n_boot=n_boot, seed=seed)
    # normalized κx's default interval is the delta method; the α and κx intervals of the table are the item
    # bootstrap's (BCa, each metric's default), from one joint resampling of the common items.
    d = lg.normalized_cross_kappa(x_all, y_all, irr="krippendorff_alpha", ci=ci, n_boot=n_boot, seed=seed,
                                  ci_method="bca").details if ci is not None else norm.details
    row: dict[str, Any] = {
        "dataset": question.dataset, "question": question.question, "level": question.level,
        "pool_x": name_x, "pool_y": name_y,
        "items_x": n_rated_items(x_all), "items_y": n_rated_items(y_all),
        "common_items": int(common.size), "ratings_common": norm.n_ratings,
        "kappa_x": d["cross_kappa"],
        "kappa_x_ci": (d.get("cross_kappa_ci_low", math.nan), d.get("cross_kappa_ci_high", math.nan)),
        "norm_kappa_x": norm.value, "norm_kappa_x_ci": _ci(norm), "norm_reason": norm.reason,
        "alpha_x_ci": (d.get("irr_x_ci_low", math.nan), d.get("irr_x_ci_high", math.nan)),
        "alpha_y_ci": (d.get("irr_y_ci_low", math.nan), d.get("irr_y_ci_high", math.nan)),
        "irr_x_in_norm": d["irr_x"], "irr_y_in_norm": d["irr_y"],
    }
    row.update(_pool_metrics(x, "x", nominal))
    row.update(_pool_metrics(y, "y", nominal))
    return row


def panel(root: Path | None = None, datasets: Sequence[str] | None = None, *, n_boot: int = DEFAULT_N_BOOT,
          seed: int = DEFAULT_SEED, ci: float | None = CI_LEVEL) -> list[dict[str, Any]]:
    """One row per (dataset, question, level, pool pair)."""
    rows = []
    for name in datasets or list(DATASETS):
        for question in DATASETS[name](root):
            for name_x, name_y in question.pairs:
                rows.append(pair_row(question, name_x, name_y, n_boot=n_boot, seed=seed, ci=ci))
    return rows


# ------------------------------------------------------------------ output
def _f(value: float, digits: int = 3) -> str:
    return "NaN" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _with_ci(value: float, ci: tuple[float, float]) -> str:
    if not all(math.isfinite(v) for v in ci):
        return _f(value)
    return f"{_f(value)} [{_f(ci[0])}, {_f(ci[1])}]"


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The main table: counts, per-pool alpha and SPA, kappa_x and normalized kappa_x with intervals."""
    header = ("| question | level | X vs Y | items X / Y / common | ratings | alpha X [95% CI] | "
              "alpha Y [95% CI] | kappa_x [95% CI] | normalized kappa_x [95% CI] | SPA X | SPA Y |")
    lines = [header, "|" + "---|" * 11]
    for r in rows:
        lines.append(
            f"| {r['question']} | {r['level']} | {r['pool_x']} vs {r['pool_y']} | "
            f"{r['items_x']:,} / {r['items_y']:,} / {r['common_items']:,} | "
            f"{r['x_ratings']:,} + {r['y_ratings']:,} | {_with_ci(r['x_alpha'], r['alpha_x_ci'])} | "
            f"{_with_ci(r['y_alpha'], r['alpha_y_ci'])} | {_with_ci(r['kappa_x'], r['kappa_x_ci'])} | "
            f"{_with_ci(r['norm_kappa_x'], r['norm_kappa_x_ci'])} | {_f(r['x_spa'])} | {_f(r['y_spa'])} |")
    return "\n".join(lines)


def markdown_nominal_table(rows: Sequence[dict[str, Any]]) -> str:
    """Fleiss' kappa and Gwet's AC1 per pool for nominal questions (the kappa paradox under imbalance)."""
    lines = ["| question | X vs Y | Fleiss X | Fleiss Y | AC1 X | AC1 Y | alpha X | alpha Y |",
             "|" + "---|" * 8]
    for r in rows:
        if r["level"] != "nominal":
            continue
        lines.append(f"| {r['question']} | {r['pool_x']} vs {r['pool_y']} | {_f(r['x_fleiss'])} | "
                     f"{_f(r['y_fleiss'])} | {_f(r['x_ac1'])} | {_f(r['y_ac1'])} | {_f(r['x_alpha'])} | "
                     f"{_f(r['y_alpha'])} |")
    return "\n".join(lines)


def report(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown: one section per dataset."""
    parts = []
    for name in dict.fromkeys(r["dataset"] for r in rows):
        subset = [r for r in rows if r["dataset"] == name]
        parts.append(f"### {name}\n\n{markdown_table(subset)}\n")
        if any(r["level"] == "nominal" for r in subset):
            parts.append(f"{markdown_nominal_table(subset)}\n")
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--datasets", nargs="*", choices=list(DATASETS), default=None)
    args = parser.parse_args(argv)
    root = data_dir()
    if not root.is_dir():
        print(f"No shared data folder at {root} (set {DATA_ENV}); nothing to do.", file=sys.stderr)
        return 0
    start = time.perf_counter()
    rows = panel(root, args.datasets, n_boot=args.n_boot, seed=args.seed)
    print(report(rows))
    print(f"_{len(rows)} pool pairs, n_boot={args.n_boot}, seed={args.seed}, labelgate {lg.__version__}, "
          f"{time.perf_counter() - start:.1f} s._")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
