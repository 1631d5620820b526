"""Merging a question's judgements into its stream: category codes of the labels (categories grow unless configured),
re-delivered judgements counted (already merged or conflicting), the merge order of the new ones, and their insertion.

A delivery that restates items (Label Studio: the tasks changed since the watermark, as they are now) replaces
instead: on each restated item, a stored judgement whose key (pool, item, rater) the delivery has with another label
is replaced, one it does not have is removed, one it has unchanged stays (its time and merge order too). The merge
returns what it removed beside what it added, and the cumulative update subtracts the one and adds the other
(:func:`labelgate.monitor.cumulative.update`), so the stream's sums are those of the current judgements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy.engine import Connection

from labelgate.core.labels import label_key, label_number, plain_label
from labelgate.monitor import judgements, windows
from labelgate.monitor.state import Meta
from labelgate.monitor.stream_store import Stream
from labelgate.monitor.touched import CROWD, RESTATED
from labelgate.pipeline.config import Window
from labelgate.pipeline.units import unit_items

KEY = ["pool", "item_id", "rater_id"]


@dataclass
class Merged:
    """The judgements a merge added (``new``, with ``code``, ``value``, ``seq``), the stored judgements of the
    same items before it (``existing``) and those of them it removed (``removed``: gone from a restated item, or
    replaced by a ``new`` judgement with the same key)."""

    existing: pd.DataFrame
    new: pd.DataFrame
    removed: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=judgements.COLUMNS))

    @property
    def kept(self) -> pd.DataFrame:
        """The stored judgements of the touched items that stay (``existing`` without ``removed``)."""
        if self.removed.empty:
            return self.existing
        gone = pd.MultiIndex.from_frame(self.removed[KEY])
        return self.existing.loc[~pd.MultiIndex.from_frame(self.existing[KEY]).isin(gone)]


def merge(
    conn: Connection,
    stream: Stream,
    frame: pd.DataFrame,
    window: Window,
    delivery_rows: dict[int, dict[str, Any]],
    summary: dict[str, Any],
    *,
    units: bool = False,
) -> Merged | None:
    """Merge a question's frame (:func:`labelgate.monitor.frames.question_frame`) into its stream.

    Labels get category codes (invalid ones counted), re-delivered judgements are counted as already merged or
    conflicting, the new ones get their merge order and are inserted. On the items a delivery restates (marker rows
    of pool ``RESTATED``), its judgements replace the stored ones (``n_replaced``), stored judgements it lacks are
    deleted (``n_removed``) and unchanged ones count as already merged. Counts go to ``delivery_rows`` (per
    delivery) and ``summary`` (the question's). Returns the new judgements, the stored ones of their items and the
    removed ones, or None when nothing changed.

    ``units``: the question's judgements are units of its items (spans: ``item#position``, from
    :func:`labelgate.pipeline.units.question_units`), and a delivery restates items, not units: every stored unit of
    a restated item is restated (read by :func:`labelgate.monitor.judgements.load_units`).
    """
    meta, sid = stream.meta, stream.row["stream_id"]
    for name in ("n_replaced", "n_removed"):
        summary.setdefault(name, 0)
        for row in delivery_rows.values():
            row.setdefault(name, 0)
    marker = (frame["pool"].to_numpy() == RESTATED) if len(frame) else np.zeros(0, dtype=bool)
    restated = frame.loc[marker].drop_duplicates("item_id", keep="last").set_index("item_id")["delivery_no"]
    frame = frame.loc[~marker]
    codes, values, valid = _codes(frame["label"], meta, stream.explicit)
    for number, bad in frame.loc[~valid].groupby("delivery_no").size().items():
        delivery_rows[int(number)]["n_invalid"] += int(bad)
    frame = frame.loc[valid].assign(code=codes[valid], value=values[valid])
    # within the pass: one judgement per (pool, item, rater), the first delivered wins
    first = ~frame.duplicated(["pool", "item_id", "rater_id"], keep="first")
    _count(frame.loc[~first], frame.loc[first], delivery_rows, summary)
    frame = frame.loc[first]
    items = pd.unique(pd.concat([frame["item_id"], restated.index.to_series()], ignore_index=True))
    if len(items) == 0:
        return None
    existing = judgements.load_items(conn, sid, items.tolist())
    if units and len(restated):
        stored_units = judgements.load_units(conn, sid, restated.index.tolist())
        existing = pd.concat([existing, stored_units], ignore_index=True).drop_duplicates(KEY)
    item_of = _unit_item if units else _same
    joined = frame.merge(existing[[*KEY, "code"]].rename(columns={"code": "stored"}), on=KEY, how="left")
    fresh = joined["stored"].isna().to_numpy()
    stating = (item_of(joined["item_id"]).map(restated) == joined["delivery_no"]).to_numpy(bool)
    _count(
        joined.loc[~fresh & ~stating].assign(code=joined["code"], clash=joined["stored"]),
        None,
        delivery_rows,
        summary,
    )
    changed = stating & ~fresh & (joined["code"].to_numpy() != joined["stored"].to_numpy())
    _count(joined.loc[stating & ~fresh & ~changed].assign(clash=joined["code"]), None, delivery_rows, summary)
    removed = _removed(existing, joined.loc[stating, KEY], joined.loc[changed, KEY], restated, delivery_rows, summary,
                       item_of)
    new = frame.loc[fresh | changed]
    if new.empty and removed.empty:
        return None
    judgements.delete_keys(conn, sid, removed)
    if new.empty:
        return Merged(existing, new.assign(seq=np.zeros(0, dtype=np.int64)), removed)
    if meta.numeric and meta.center is None:
        meta.center = float(new["value"].iloc[0])
    new = _sequence(stream.row, new, window, delivery_rows, summary)
    replaced = joined.loc[changed].groupby("delivery_no").size()
    for number, count in replaced.items():  # a replacement is counted as replaced, not as new
        delivery_rows[int(number)]["n_new"] -= int(count)
        delivery_rows[int(number)]["n_replaced"] += int(count)
    summary["n_new"] -= int(replaced.sum())
    summary["n_replaced"] += int(replaced.sum())
    judgements.insert_new(conn, sid, new)
    return Merged(existing, new, removed)


def _removed(
    existing: pd.DataFrame,
    stated: pd.DataFrame,
    replaced: pd.DataFrame,
    restated: pd.Series,
    delivery_rows: dict[int, dict[str, Any]],
    summary: dict[str, Any],
    item_of: Callable[[pd.Series], pd.Series],
) -> pd.DataFrame:
    """The stored judgements a merge removes: those of a restated item whose key its delivery does not state (counted
    as ``n_removed`` of that delivery), and those ``replaced`` by a new label. ``item_of``: the restated item of a
    judgement's item id (a span unit's item)."""
    if existing.empty:
        return existing
    keys = pd.MultiIndex.from_frame(existing[KEY])
    item = item_of(existing["item_id"])
    absent = item.isin(restated.index).to_numpy(bool) & ~keys.isin(pd.MultiIndex.from_frame(stated))
    for number, count in item.loc[absent].map(restated).value_counts().items():
        delivery_rows[int(number)]["n_removed"] += int(count)
        summary["n_removed"] += int(count)
    return existing.loc[absent | keys.isin(pd.MultiIndex.from_frame(replaced))]


def _same(items: pd.Series) -> pd.Series:
    return items


def _unit_item(items: pd.Series) -> pd.Series:
    """The item of each unit id (the one rule of :func:`labelgate.pipeline.units.unit_items`)."""
    return pd.Series(unit_items(items), index=items.index, dtype=object)


def _count(
    dropped: pd.DataFrame,
    kept: pd.DataFrame | None,
    delivery_rows: dict[int, dict[str, Any]],
    summary: dict[str, Any],
) -> None:
    """Count re-delivered judgements: identical (already merged) or with another label (conflict)."""
    if dropped.empty:
        return
    if kept is not None:  # duplicates within this pass: compare with the kept judgement
        ref = kept[["pool", "item_id", "rater_id", "code"]].rename(columns={"code": "clash"})
        dropped = dropped.merge(ref, on=["pool", "item_id", "rater_id"], how="left")
    same = dropped["code"].to_numpy() == dropped["clash"].to_numpy()
    for (number, is_same), count in (
        dropped.assign(same=same).groupby(["delivery_no", "same"]).size().items()
    ):
        field_name = "n_already" if is_same else "n_conflicts"
        delivery_rows[int(number)][field_name] += int(count)
        summary[field_name] += int(count)


def _sequence(
    r: dict[str, Any],
    new: pd.DataFrame,
    window: Window,
    delivery_rows: dict[int, dict[str, Any]],
    summary: dict[str, Any],
) -> pd.DataFrame:
    """Merge order of the crowd judgements (by time, then delivery order); late judgements counted.

    ``r`` is the stream's row: its ``n_seq``, ``first_ts`` and ``watermark`` advance.
    """
    crowd = new["pool"].to_numpy() == CROWD
    order = np.lexsort((np.arange(len(new)), new["delivery_no"].to_numpy(), new["ts"].to_numpy(), ~crowd))
    new = new.iloc[order].copy()
    is_crowd = new["pool"].to_numpy() == CROWD
    n_crowd = int(is_crowd.sum())
    seq = np.full(len(new), -1, dtype=np.int64)
    seq[is_crowd] = r["n_seq"] + np.arange(n_crowd)
    new["seq"] = seq
    for number, count in new.groupby("delivery_no").size().items():
        delivery_rows[int(number)]["n_new"] += int(count)
    summary["n_new"] += len(new)
    if n_crowd:
        ts = new.loc[is_crowd, "ts"].to_numpy()
        if window.kind == "hours" and r["closed_until"] is not None:
            late = ts < r["closed_until"] * windows.length_us(window)
            if late.any():
                summary["n_late"] += int(late.sum())
                for number, count in new.loc[is_crowd].loc[late].groupby("delivery_no").size().items():
                    delivery_rows[int(number)]["n_late"] += int(count)
        r["n_seq"] += n_crowd
        r["first_ts"] = int(ts.min()) if r["first_ts"] is None else min(r["first_ts"], int(ts.min()))
        r["watermark"] = int(ts.max()) if r["watermark"] is None else max(r["watermark"], int(ts.max()))
    return new


def _among(elements: tuple[str, ...], allowed: list[str] | None) -> bool:
    """Whether a set's elements are all among the listed categories (compared as texts, as the gate's validation
    does; every set is when none are listed)."""
    return allowed is None or set(elements) <= set(allowed)


def _codes(labels: pd.Series, meta: Meta, explicit: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Category code and numeric value of each label (categories grow unless explicit); valid mask.

    Labels are keyed once per distinct value (:func:`labelgate.core.labels.label_key`), not once per row. A label set
    is keyed by its canonical form, so a set's code is the same whatever delivery it comes in; the sets seen are the
    stream's categories, appended in order of appearance.
    """
    lookup = {label_key(c): j for j, c in enumerate(meta.categories)}
    factor, uniques = pd.factorize(labels, use_na_sentinel=True)
    unique_codes = np.full(len(uniques), -1, dtype=np.int64)
    for position, label in enumerate(uniques.tolist()):
        key = label_key(label)
        if key is None or (meta.numeric and key[0] != "n"):
            continue
        if meta.level == "set" and (key[0] != "t" or not _among(key[1], meta.elements)):
            continue  # a set with an element outside the listed categories is invalid, as the gate's validation says
        code = lookup.get(key)
        if code is None:
            if explicit:
                continue
            code = len(meta.categories)
            meta.categories.append(plain_label(label))
            lookup[key] = code
        unique_codes[position] = code
    codes = np.where(factor >= 0, unique_codes[np.maximum(factor, 0)], -1).astype(np.int64)
    numbers = [label_number(c) for c in meta.categories]
    category_values = np.asarray([np.nan if n is None else float(n) for n in numbers] or [np.nan], dtype=float)
    values = np.where(codes >= 0, category_values[np.maximum(codes, 0)], np.nan)
    return codes, values, codes >= 0
