"""Synthetic crowd and trusted tables of the three richer judgement kinds: label sets, text spans and image boxes.

Each generator draws a gold annotation per item and lets every rater copy it with small noise (a shifted span
boundary, a jittered box, a flipped tag); ``miss`` is the share of gold entities / boxes / tags a crowd rater leaves
out (0.5: a crowd that misses half of them). The trusted pool always copies with the small noise only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SPAN_LABELS = ("PER", "LOC", "ORG")
BOX_LABELS = ("car", "person", "bike")
TAGS = ("sports", "politics", "tech", "health", "travel")


def _raters(rng: np.random.Generator, pool: str, n: int, per_item: int) -> list[str]:
    return [f"{pool[0]}{k}" for k in sorted(rng.choice(n, size=per_item, replace=False))]


def spans(n_docs: int = 40, *, miss: float = 0.0, length: int = 120, seed: int = 0) -> pd.DataFrame:
    """One row per span (``item_id, rater_id, start, end, label, length, pool``); a rater who marked nothing in a
    text has one row with empty ``start`` / ``end`` / ``label``."""
    rng = np.random.default_rng(seed)
    rows = []
    for doc in range(n_docs):
        # three gold entities in three separate thirds of the text, so no two overlap
        gold = []
        for third in range(3):
            start = third * (length // 3) + int(rng.integers(0, length // 3 - 12))
            gold.append((start, start + int(rng.integers(3, 10)), SPAN_LABELS[int(rng.integers(0, 3))]))
        for pool, n_raters in (("trusted", 4), ("crowd", 8)):
            for rater in _raters(rng, pool, n_raters, 3):
                marked = 0
                for start, end, label in gold:
                    if pool == "crowd" and rng.random() < miss:
                        continue
                    shift = int(rng.integers(-1, 2)) if rng.random() < 0.2 else 0
                    rows.append((f"d{doc}", rater, max(0, start + shift), end, label, length, pool))
                    marked += 1
                if not marked:
                    rows.append((f"d{doc}", rater, None, None, None, length, pool))
    frame = pd.DataFrame(rows, columns=["item_id", "rater_id", "start", "end", "label", "length", "pool"])
    return frame.astype({"start": "Int64", "end": "Int64"})


def boxes(n_images: int = 60, *, miss: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """One row per box (``item_id, rater_id, x, y, width, height, label, pool``; percent coordinates); a rater who
    drew nothing on an image has one row with empty coordinates and label."""
    rng = np.random.default_rng(seed)
    rows = []
    for image in range(n_images):
        n = int(rng.integers(1, 5))
        gold = [(15.0 + 22.0 * k, float(rng.uniform(10, 60)), float(rng.uniform(10, 18)), float(rng.uniform(10, 30)),
                 BOX_LABELS[int(rng.integers(0, 3))]) for k in range(n)]  # side by side: no two overlap
        for pool, n_raters in (("trusted", 4), ("crowd", 8)):
            for rater in _raters(rng, pool, n_raters, 3):
                drawn = 0
                for x, y, w, h, label in gold:
                    if pool == "crowd" and rng.random() < miss:
                        continue
                    jitter = rng.normal(0, 0.4, size=4)
                    rows.append((f"img{image}", rater, x + jitter[0], y + jitter[1], w + jitter[2], h + jitter[3],
                                 label, pool))
                    drawn += 1
                if not drawn:
                    rows.append((f"img{image}", rater, None, None, None, None, None, pool))
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "x", "y", "width", "height", "label", "pool"])


def sets(n_items: int = 150, *, miss: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """One row per judgement whose ``label`` is a list of tags (possibly empty: none applies)."""
    rng = np.random.default_rng(seed)
    rows = []
    for item in range(n_items):
        gold = [t for t in TAGS if rng.random() < 0.35]
        for pool, n_raters in (("trusted", 4), ("crowd", 8)):
            for rater in _raters(rng, pool, n_raters, 3):
                tags = [t for t in gold if not (pool == "crowd" and rng.random() < miss) and rng.random() > 0.03]
                rows.append((f"i{item}", rater, tags, pool))
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])
