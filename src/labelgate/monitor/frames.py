"""The judgements of one question in the accepted deliveries, in canonical columns: ids as text, pool codes and
times in microseconds; rows without an item, rater, known pool or time are counted as invalid and dropped. An item a
delivery restates (:attr:`~labelgate.pipeline.sources.deliveries.Delivery.restates`) adds one marker row (pool
``RESTATED``, no rater or label), so that the merge sees it even when the delivery has no judgement left on it.

A span question's rows are expanded into unit judgements here (per delivery: a rater's units of a text depend on
their own spans only); a box question's rows stay raw boxes (with their geometry), since an image's objects depend on
every rater's boxes of it: :mod:`labelgate.monitor.boxes` regroups them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.monitor.intake import Accepted
from labelgate.monitor.touched import CROWD, RESTATED, TRUSTED
from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.sources.deliveries import Delivery, parse_timestamps
from labelgate.pipeline.units import canonical_sets, question_units

COLUMNS = ["item_id", "rater_id", "label", "ts", "delivery_no", "pool"]
#: The geometry of a box row, in the frame of a ``kind: boxes`` question (from the question's ``boxes`` columns).
BOX_COLUMNS = ("x", "y", "width", "height")


def question_frame(
    cfg: MonitorConfig, question: Any, accepted: list[Accepted], delivery_rows: dict[int, dict[str, Any]]
) -> pd.DataFrame:
    """The question's judgements of the accepted deliveries, canonical columns (invalid rows counted)."""
    frames = []
    for acc in accepted:
        df = acc.delivery.frame
        if acc.delivery.restates:
            items = list(acc.delivery.restates)
            frames.append(pd.DataFrame({"item_id": items, "rater_id": None, "label": None, "ts": 0,
                                        "delivery_no": acc.number, "pool": RESTATED}))
        if df is None or df.empty:
            continue
        out, n_invalid = _delivery_frame(cfg, question, acc, df)
        delivery_rows[acc.number]["n_invalid"] += n_invalid
        frames.append(out)
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.concat(frames, ignore_index=True)
    frame["ts"] = frame["ts"].astype(np.int64)
    return frame


def _delivery_frame(cfg: MonitorConfig, question: Any, acc: Accepted, df: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The valid judgements on the question of one delivery (its rows ``df``), and the number of invalid ones."""
    cols, pools, delivery = cfg.columns, cfg.pools, acc.delivery
    label = cfg.label_column(question)
    if question.level == "set":  # every set cell in one canonical form, as the gate reads it
        df = canonical_sets(cfg.model_copy(update={"questions": [question]}), df)
    if cols.question:
        _require(delivery, df, cols.question, f"no question column {cols.question!r}.")
        qv = question.question_value if question.question_value is not None else question.name
        df = df.loc[(df[cols.question].astype(object) == qv).to_numpy(bool)]
    for name in (cols.item, cols.rater, label):
        _require(delivery, df, name, f"no column {name!r}; it has {sorted(map(str, df.columns))}.")
    if question.kind == "spans" and len(df):  # one judgement per position (or token), as the gate measures them
        if cols.pool not in df.columns and delivery.default_pool:
            df = df.assign(**{cols.pool: delivery.default_pool})
        _require(delivery, df, cols.pool, f"no pool column {cols.pool!r}; add it or set monitor.source.default_pool.")
        df = question_units(cfg, question, df)[0]
    if question.kind != "boxes":  # a box row without a label is a rater who drew nothing: kept
        df = df.loc[df[label].notna()]
    if cols.pool in df.columns:
        pool = _ids(df[cols.pool])
    else:
        if not delivery.default_pool:
            _require(delivery, df, cols.pool,
                     f"no pool column {cols.pool!r}; add it or set monitor.source.default_pool.")
        pool = pd.Series(delivery.default_pool, index=df.index, dtype=object)
    if cols.timestamp:
        _require(delivery, df, cols.timestamp, f"no timestamp column {cols.timestamp!r}.")
        ts = parse_timestamps(df[cols.timestamp])
    else:
        ts = pd.Series(delivery.arrived_at, index=df.index, dtype="Int64")
    out = pd.DataFrame(
        {
            "item_id": _ids(df[cols.item]),
            "rater_id": _ids(df[cols.rater]),
            "label": df[label].astype(object),
            "ts": ts,
            "delivery_no": acc.number,
        }
    )
    if question.boxes is not None:  # the raw boxes: regrouped into objects with the image's stored ones
        for name in BOX_COLUMNS:
            column = getattr(question.boxes, name)
            _require(delivery, df, column, f"no box column {column!r}.")
            out[name] = pd.to_numeric(df[column], errors="coerce").astype("float64")
    pool_code = pool.map({pools.crowd: CROWD, pools.trusted: TRUSTED})
    valid = out["item_id"].notna() & out["rater_id"].notna() & pool_code.notna() & out["ts"].notna()
    out = out.loc[valid.to_numpy(bool)].assign(pool=pool_code[valid].astype(np.int64))
    return out, int((~valid).sum())


def _require(delivery: Delivery, df: pd.DataFrame, column: str, problem: str) -> None:
    """Refuse a delivery without ``column``; ``problem`` completes the message."""
    if column not in df.columns:
        raise InputError(f"Delivery {delivery.delivery_id!r} has {problem}", Reason.MISSING_COLUMN, column=column)


def _ids(values: pd.Series) -> pd.Series:
    """Ids as text (integral floats lose their '.0'); missing stays None."""

    def text(v: Any) -> Any:
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return None
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v)

    return values.astype(object).map(text)
