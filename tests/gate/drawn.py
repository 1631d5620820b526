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
        gold = [(12.0 + 22.0 * k, float(rng.uniform(10, 60)), float(rng.uniform(10, 16)), float(rng.uniform(10, 30)),
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


# ------------------------------------------------------------------------------------------ as Label Studio exports
#: Labeling configs of the three kinds (the NER and detection templates of Label Studio, a multi-choice one).
LS_CONFIGS = {
    "spans": '<View><Labels name="label" toName="text"><Label value="PER"/><Label value="LOC"/><Label value="ORG"/>'
             '</Labels><Text name="text" value="$text"/></View>',
    "boxes": '<View><Image name="image" value="$image"/><RectangleLabels name="box" toName="image">'
             '<Label value="car"/><Label value="person"/><Label value="bike"/></RectangleLabels></View>',
    "sets": '<View><Text name="text" value="$text"/><Choices name="topics" toName="text" choice="multiple">'
            + "".join(f'<Choice value="{t}"/>' for t in TAGS) + "</Choices></View>",
}
LS_CONTROLS = {"spans": "label", "boxes": "box", "sets": "topics"}


def annotator(rater: str) -> int:
    """A Label Studio user id for a synthetic rater (``t2`` → 102, ``c5`` → 205)."""
    return (100 if rater.startswith("t") else 200) + int(rater[1:])


def label_studio_tasks(frame: pd.DataFrame, kind: str, *, cancelled: bool = True) -> list[dict]:
    """The tasks of a Label Studio JSON export holding ``frame``'s judgements (one annotation per item and rater; a
    rater who marked nothing has an annotation with an empty result). With ``cancelled``, every task also holds a
    cancelled (skipped) annotation of another user, whose result must not be read."""
    tasks = []
    for number, (item, rows) in enumerate(frame.groupby("item_id", sort=False)):
        if kind == "spans":
            data = {"text": "x" * int(rows["length"].iloc[0])}
        elif kind == "boxes":
            data = {"image": f"/data/{item}.png"}
        else:
            data = {"text": f"text {item}"}
        annotations = []
        for k, (rater, mine) in enumerate(rows.groupby("rater_id", sort=False)):
            annotations.append({"id": number * 100 + k + 1, "completed_by": annotator(str(rater)),
                                "was_cancelled": False, "ground_truth": False, "result": _results(mine, kind),
                                "updated_at": "2026-11-20T10:00:00.000000Z"})
        if cancelled:
            annotations.append({"id": number * 100 + 99, "completed_by": 299, "was_cancelled": True,
                                "ground_truth": False, "result": _results(rows.iloc[:1], kind),
                                "updated_at": "2026-11-20T10:00:00.000000Z"})
        tasks.append({"id": number + 1, "data": data, "annotations": annotations, "drafts": [],
                      "meta": {"item": str(item)}})
    return tasks


def _results(rows: pd.DataFrame, kind: str) -> list[dict]:
    out = []
    for k, row in enumerate(rows.itertuples(index=False)):
        if kind == "sets":
            if list(row.label):
                out.append({"id": f"r{k}", "from_name": "topics", "to_name": "text", "type": "choices",
                            "value": {"choices": list(row.label)}})
        elif kind == "spans" and not pd.isna(row.start):
            out.append({"id": f"r{k}", "from_name": "label", "to_name": "text", "type": "labels",
                        "value": {"start": int(row.start), "end": int(row.end), "text": "x" * int(row.end - row.start),
                                  "labels": [row.label]}})
        elif kind == "boxes" and not pd.isna(row.x):
            out.append({"id": f"r{k}", "from_name": "box", "to_name": "image", "type": "rectanglelabels",
                        "original_width": 1000, "original_height": 800, "image_rotation": 0,
                        "value": {"x": float(row.x), "y": float(row.y), "width": float(row.width),
                                  "height": float(row.height), "rotation": 0, "rectanglelabels": [row.label]}})
    return out
