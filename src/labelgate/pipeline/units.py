"""Spans and boxes as units: the judgement table of a ``kind: spans`` or ``kind: boxes`` question, expanded into the
long table of one categorical judgement per (unit, rater) that the gate and the monitor measure.

A span table holds one row per span (``[start, end)`` character offsets, a label, the text's length); a box table one
row per box. :meth:`labelgate.Ratings.from_spans` and :meth:`labelgate.Ratings.from_boxes` define the units (each
position or token of a text, each object of an image: boxes of different raters grouped at the IoU threshold) and
every rater's label on each of them (``O`` outside every span; ``none`` for an object a rater drew no box for). This
module only calls them on both pools at once (so the crowd's and the trusted pool's units are the same units) and
writes their judgements back as rows: one implementation of the expansion, whatever reads the table after it
(validation, the GX suite, the diagnostics, the monitor's merge).

A unit's item id is the item's id and the unit's place in it joined by ``#`` (``doc7#120``: position 120 of text
``doc7``; ``img3#2``: object 2 of image ``img3``); its rater and pool are the span's or box's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.pipeline.config.models import UNIT_LABELS, GateConfig, Question
from labelgate.pipeline.sources.pools import question_value

#: The label of a position no span covers, and of an object a rater drew no box for.
OUTSIDE, MISSED = UNIT_LABELS["spans"], UNIT_LABELS["boxes"]
#: Joins an item's id and a unit's place in it.
UNIT_SEP = "#"
#: Joins a pool and a rater id while both pools are expanded at once (a rater id may be in both pools).
_POOL_SEP = "\x1f"
#: The key of a record's ``validation`` JSON that keeps a decision's span / box section (:func:`recorded`).
RECORD_KEY = "units"


def canonical_sets(config: GateConfig, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the labels of every ``level: set`` question written as sorted tuples of texts.

    A cell is read as the core reads it (:func:`labelgate.core.sets.encode_sets`: a list, tuple, set, frozenset or
    a Parquet list is a set; a string is split at the question's ``sep``; an empty one is the empty set, "none
    applies"; a missing cell is no judgement). One canonical form (:func:`labelgate.core.labels.set_key`, the key of a
    set in the core's label keying) makes the label the same whatever the file's format, hashes alike in every process
    (a frozenset's text depends on the process's string hashing) and is what validation checks element by element
    and the monitor keys a set by. The table is copied only when it holds a set question.

    Raises
    ------
    InputError
        A cell that is none of these (a string without ``sep``, a number), naming the column and the row.
    """
    questions = [q for q in config.questions if q.level == "set"]
    if not questions:
        return frame
    from labelgate.core.labels import set_key
    from labelgate.core.sets import encode_sets

    frame = frame.copy()
    for question in questions:
        column = config.label_column(question)
        if column not in frame.columns:
            continue  # validation names the missing column
        rows = _rows_of(frame, config, question) if config.columns.question else np.ones(len(frame), dtype=bool)
        cells = frame[column].to_numpy(dtype=object)[rows]
        encoded = encode_sets(pd.Series(cells, dtype=object), sep=question.sep, name=column,
                              row_labels=frame.index[rows])
        forms = np.empty(len(encoded.categories) + 1, dtype=object)
        forms[:-1] = [set_key(members) for members in encoded.categories]
        forms[-1] = None  # code -1: a missing cell
        out = frame[column].astype(object).to_numpy(copy=True)
        out[rows] = forms[np.asarray(encoded.codes, dtype=np.int64)]
        frame[column] = out
    return frame


def set_elements(labels: Any) -> list[str]:
    """The distinct elements of canonical set labels (:func:`canonical_sets`), sorted."""
    return sorted({element for label in labels if isinstance(label, tuple) for element in label})


def drawn(config: GateConfig) -> list[Question]:
    """The questions whose judgements are spans or boxes."""
    return [q for q in config.questions if q.kind != "labels"]


def unit_label(question: Question) -> str | None:
    """The label the core gives a unit where a rater marked nothing (``O`` for spans, ``none`` for boxes)."""
    return UNIT_LABELS.get(question.kind)


def unit_config(config: GateConfig) -> GateConfig:
    """``config`` as it applies to the expanded table: every span / box question lists its categories with the unit
    label (``O`` / ``none``) added, since validation checks each unit's label against them. Idempotent."""
    questions = []
    for question in config.questions:
        extra = unit_label(question)
        if extra is not None and question.categories is not None and extra not in question.categories:
            question = question.model_copy(update={"categories": [*question.categories, extra]})
        questions.append(question)
    return config.model_copy(update={"questions": questions})


def expand(config: GateConfig, crowd: pd.DataFrame, trusted: pd.DataFrame
           ) -> tuple[GateConfig, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The crowd and trusted tables with every span / box question's rows replaced by its unit judgements.

    Returns ``(config, crowd, trusted, info)``: the configuration as it applies to the units (:func:`unit_config`),
    both tables (the rows of ``kind: labels`` questions as they were), and per expanded question what was read
    (``{"kind", "unit", "rows": {pool: n}, "items": {pool: n}, "units": n}``, and for boxes ``"iou"``, the mean
    matched IoU per pool and per rater: :func:`matched_iou`). Label sets are written in one form first
    (:func:`canonical_sets`). Tables with no set, span or box question are returned as they are.

    Raises
    ------
    InputError
        A column a question names is missing, or the core refuses a span or box (its message names the row).
    """
    crowd, trusted = (canonical_sets(config, t) for t in (crowd, trusted))
    questions = drawn(config)
    if not questions:
        return config, crowd, trusted, {}
    cols = config.columns
    both = _with_pool(crowd, config.pools.crowd, cols.pool), _with_pool(trusted, config.pools.trusted, cols.pool)
    pieces: list[list[pd.DataFrame]] = [[], []]
    keep = [np.ones(len(t), dtype=bool) for t in both]
    info: dict[str, Any] = {}
    for question in questions:
        mine = [_rows_of(t, config, question) for t in both]
        for k, mask in enumerate(mine):
            keep[k] &= ~mask
            require_ids(config, question, both[k].loc[mask], ("batch", "trusted")[k])
        units, summary = question_units(config, question,
                                        pd.concat([both[0].loc[mine[0]], both[1].loc[mine[1]]], ignore_index=True))
        info[question.name] = summary
        for k, pool in enumerate((config.pools.crowd, config.pools.trusted)):
            pieces[k].append(units.loc[(units[cols.pool] == pool).to_numpy(bool)])
    # the rows no span / box question took (other questions'), if any: concatenating an empty table of text columns
    # with the units' categoricals would turn every unit's text into an object
    out = [pd.concat([*([t.loc[k]] if k.any() else []), *p], ignore_index=True)
           for t, k, p in zip(both, keep, pieces, strict=True)]
    for table, original in zip(out, (crowd, trusted), strict=True):
        table.attrs = dict(original.attrs)  # what a source said of the table (a Label Studio reading's controls)
    return unit_config(config), out[0], out[1], info


def _with_pool(frame: pd.DataFrame, value: str, column: str) -> pd.DataFrame:
    return frame if column in frame.columns else frame.assign(**{column: value})


def _rows_of(frame: pd.DataFrame, config: GateConfig, question: Question) -> np.ndarray:
    """Which rows of ``frame`` are ``question``'s (all of them without a question column)."""
    if not config.columns.question:
        return np.ones(len(frame), dtype=bool)
    column = config.columns.question
    if column not in frame.columns:
        raise InputError(f"Column {column!r} (columns.question) is missing; the table has columns "
                         f"{sorted(map(str, frame.columns))}.", Reason.MISSING_COLUMN, column=column)
    return (frame[column].astype(object) == question_value(config, question)).to_numpy(bool)


def question_units(config: GateConfig, question: Question, rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The unit judgements of one question's span / box ``rows`` (both pools, told apart by the pool column), and
    what was read. The units' rows carry the item, rater, label and pool columns (and the question column when the
    configuration has one); with ``columns.timestamp``, each unit judgement carries its span's or box's time (the
    latest of the rater's rows on the item)."""
    cols = config.columns
    label = config.label_column(question)
    if rows.empty:
        raise InputError(f"Question {question.name!r} ({question.kind}) has no row in the batch or the trusted "
                         "table.", Reason.EMPTY_INPUT)
    names = _columns(config, question)
    missing = [c for c in (cols.item, cols.rater, label, *names.values()) if c not in rows.columns]
    if missing:
        raise InputError(f"Question {question.name!r} ({question.kind}) reads column(s) {missing}; the table has "
                         f"columns {sorted(map(str, rows.columns))}.", Reason.MISSING_COLUMN, column=missing[0])
    require_ids(config, question, rows, "")
    pool = rows[cols.pool].astype(str)
    frame = pd.DataFrame({"item": rows[cols.item].astype(str),
                          "rater": (pool + _POOL_SEP + rows[cols.rater].astype(str)).to_numpy(),
                          "label": rows[label], **{k: rows[c] for k, c in names.items()}})
    ratings = _ratings(question, frame)
    units = _rows(ratings, config, question)
    if cols.timestamp and cols.timestamp in rows.columns:
        latest = rows.groupby([pool.to_numpy(), rows[cols.item].astype(str).to_numpy(),
                               rows[cols.rater].astype(str).to_numpy()])[cols.timestamp].max()
        where = pd.MultiIndex.from_arrays([units[cols.pool], unit_items(units[cols.item]), units[cols.rater]])
        units[cols.timestamp] = latest.reindex(where).to_numpy()
    summary: dict[str, Any] = {
        "kind": question.kind, "unit": question.spans.unit if question.spans is not None else "object",
        "rows": {str(p): int(n) for p, n in pool.value_counts().items()},
        "items": {str(p): int(n) for p, n in rows.groupby(pool)[cols.item].nunique().items()},
        "units": int(ratings.n_items)}
    if question.kind == "boxes":
        summary["iou"] = matched_iou(frame, question)
    return units, summary


def require_ids(config: GateConfig, question: Question, rows: pd.DataFrame, table: str) -> None:
    """Refuse span / box rows without an item, rater or pool id, naming the column and the first such row (its label
    in ``rows``' index: the file's data row). Validation only sees the unit judgements made of them, so the ids are
    checked here: a unit of no item must not be made up."""
    cols = config.columns
    for column in (cols.item, cols.rater, cols.pool):
        absent = rows[column].isna().to_numpy(bool) if column in rows.columns else np.zeros(0, dtype=bool)
        if absent.any():
            where = f" of the {table} table" if table else ""
            raise InputError(f"Question {question.name!r} ({question.kind}): column {column!r} is empty in "
                             f"{int(absent.sum())} row(s){where}, the first row "
                             f"{rows.index.tolist()[int(np.argmax(absent))]!r}; "
                             "every span or box needs its item, rater and pool.", Reason.MISSING_VALUE,
                             column=column, question=question.name)


def _columns(config: GateConfig, question: Question) -> dict[str, str]:
    """``{argument of the core's constructor: column}`` of a span / box question."""
    if question.spans is not None:
        spans = question.spans
        named = {"start": spans.start, "end": spans.end, "length": spans.length}
        return {**named, "tokens": spans.tokens} if spans.tokens else named
    boxes = question.boxes
    assert boxes is not None  # the config's validator gives every boxes question its columns
    return {"x": boxes.x, "y": boxes.y, "width": boxes.width, "height": boxes.height}


def _ratings(question: Question, frame: pd.DataFrame) -> Any:
    """The core's Ratings of one question's spans or boxes (``frame`` in the constructor's argument names)."""
    from labelgate.core.ratings import Ratings

    shared = {"item": "item", "rater": "rater", "label": "label"}
    if question.spans is not None:
        extra = {"tokens": "tokens"} if "tokens" in frame.columns else {}
        return Ratings.from_spans(frame, start="start", end="end", length="length", unit=question.spans.unit,
                                  **shared, **extra)
    assert question.boxes is not None
    return Ratings.from_boxes(frame, x="x", y="y", width="width", height="height", iou=question.boxes.iou,
                              **shared)


def _rows(ratings: Any, config: GateConfig, question: Question) -> pd.DataFrame:
    """The judgements of ``ratings`` as rows in the table's columns, pools and raters split back apart."""
    cols = config.columns
    if ratings.level != "nominal":
        raise InputError(f"Question {question.name!r}: a rater's overlapping spans with different labels make a "
                         "position's judgement a set; the gate measures spans whose labels do not overlap (merge or "
                         "drop the overlapping spans first).", Reason.INVALID_PARAMETER)
    # a unit's id and a label are written once (categoricals over the codes): a per-character table repeats each
    # label millions of times, and making a text per row is what would cost (docs/validation.md)
    units = pd.Categorical.from_codes(ratings.item_codes, categories=[
        f"{u[0]}{UNIT_SEP}{u[1]}" if type(u) is tuple and len(u) == 2 else _unit_id(u)
        for u in np.asarray(ratings.item_labels, dtype=object)])
    labels = pd.Categorical.from_codes(ratings.value_codes, categories=list(ratings.categories))
    qualified = [str(r).partition(_POOL_SEP) for r in np.asarray(ratings.rater_labels, dtype=object)]
    out = pd.DataFrame({cols.item: units,
                        cols.rater: _coded([name for _, _, name in qualified], ratings.rater_codes),
                        config.label_column(question): labels,
                        cols.pool: _coded([pool for pool, _, _ in qualified], ratings.rater_codes)})
    if cols.question:
        out[cols.question] = question_value(config, question)
    return out


def _coded(values: list[str], codes: np.ndarray) -> pd.Categorical:
    """``values[codes]`` as a categorical (``values`` may repeat: a rater id in both pools)."""
    categories, position = np.unique(np.asarray(values, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(position.reshape(-1)[codes], categories=list(categories))


def source_items(config: GateConfig, frame: pd.DataFrame) -> pd.Series:
    """The item (text, image, task) of each row of a table :func:`expand` made: a span / box question's unit id
    (``doc7#120``) gives its item (``doc7``), every other row's item is its own (what a write-back addresses)."""
    items = frame[config.columns.item]
    questions = drawn(config)
    if not questions:
        return items
    units = np.zeros(len(frame), dtype=bool)
    for question in questions:
        units |= _rows_of(frame, config, question)
    out = items.astype(object).copy()
    out[units] = unit_items(items[units])
    return out


def unit_items(unit_ids: pd.Series) -> np.ndarray:
    """The item of each unit id (``item#place`` → ``item``; an item id may itself hold ``#``).

    >>> unit_items(pd.Series(["doc7#120", "a#b#3"])).tolist()
    ['doc7', 'a#b']
    """
    if len(unit_ids) == 0:
        return np.empty(0, dtype=object)
    return unit_ids.astype(str).str.rpartition(UNIT_SEP)[0].to_numpy(dtype=object)


def _unit_id(label: Any) -> str:
    """``item#place`` from the core's unit label (a tuple ``(item, place)``, or already text)."""
    if isinstance(label, tuple):
        return UNIT_SEP.join(str(part) for part in label)
    return str(label)


def matched_iou(frame: pd.DataFrame, question: Question) -> dict[str, Any]:
    """Mean IoU of the matched boxes (:func:`labelgate.matched_iou`): each pool's own (its boxes grouped alone), and
    per rater over the pairs holding one of their boxes when both pools are grouped together (how tightly a rater's
    boxes fit the others', trusted raters' included). ``{"crowd": mean, "trusted": mean, "raters": {pool: {rater:
    mean}}}``; NaN where no two boxes were grouped."""
    from labelgate.metrics.spans import matched_iou as measure

    assert question.boxes is not None
    columns: dict[str, Any] = {"item": "item", "rater": "rater", "x": "x", "y": "y", "width": "width",
                               "height": "height", "label": "label", "iou": question.boxes.iou}
    pools = frame["rater"].astype(str).str.partition(_POOL_SEP)[0].to_numpy(dtype=object)
    out: dict[str, Any] = {}
    for pool in dict.fromkeys(pools):
        out[str(pool)] = float(measure(frame.loc[pools == pool], **columns).value)
    out["raters"] = {}
    for rater, (mean, _pairs) in measure(frame, **columns).details["per_rater"].items():
        pool, _, name = str(rater).partition(_POOL_SEP)
        out["raters"].setdefault(pool, {})[name] = float(mean)
    return out


def per_label(config: GateConfig, frame: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Per span / box question, the agreement on each label alone: every unit recoded "this label" or "another",
    then the crowd's and the trusted pool's Krippendorff's α and κx between them (no interval; the gate decides on
    the question's own suite). ``frame`` is the gate's canonical table (``item_id, rater_id, label, pool,
    question``). A label one pool never uses has undefined (NaN) coefficients, reported as such.

    Returns ``{question: [{"label", "units_crowd", "units_trusted", "alpha_crowd", "alpha_trusted",
    "cross_kappa"}, ...]}``, labels in the order of the question's categories (the unit label left out).
    """
    from labelgate.core.ratings import ratings_by_pool
    from labelgate.metrics.alpha import krippendorff_alpha
    from labelgate.metrics.cross import cross_kappa

    out: dict[str, list[dict[str, Any]]] = {}
    for question in drawn(config):
        rows = frame.loc[(frame["question"] == question.name).to_numpy(bool)]
        if rows.empty:
            continue
        blank = unit_label(question)
        present = pd.unique(rows["label"])
        labels = [c for c in (question.categories or sorted(map(str, present))) if c != blank]
        table = []
        for label in labels:
            hit = (rows["label"] == label).to_numpy(bool)
            pools = ratings_by_pool(rows.assign(label=hit), categories=[False, True])
            crowd, trusted = pools.get(config.pools.crowd), pools.get(config.pools.trusted)
            entry: dict[str, Any] = {
                "label": label,
                "units_crowd": int(hit[(rows["pool"] == config.pools.crowd).to_numpy(bool)].sum()),
                "units_trusted": int(hit[(rows["pool"] == config.pools.trusted).to_numpy(bool)].sum())}
            entry["alpha_crowd"] = _value(krippendorff_alpha, crowd)
            entry["alpha_trusted"] = _value(krippendorff_alpha, trusted)
            entry["cross_kappa"] = _value(cross_kappa, crowd, trusted)
            table.append(entry)
        out[question.name] = table
    return out


def _value(metric: Any, *ratings: Any) -> float:
    """The metric's point value, NaN when a pool is absent or the metric is undefined there."""
    if any(r is None for r in ratings):
        return float("nan")
    return float(metric(*ratings).value)


def report(config: GateConfig, expanded: dict[str, Any], frame: pd.DataFrame) -> dict[str, Any]:
    """What the report shows of each span / box question: :func:`expand`'s account of it and :func:`per_label`."""
    labels = per_label(config, frame)
    return {name: {**summary, "labels": labels.get(name, [])} for name, summary in expanded.items()}


def recorded(section: Mapping[str, Any]) -> dict[str, Any]:
    """The span / box section (:func:`report`) as a decision's record keeps it, so that a request served that decision
    later shows the same section (:func:`of_summary`): everything but the per-rater matched IoU, which grows with the
    raters (per-rater rows stay out of the store) and which the expansion of the same inputs computes again.

    >>> recorded({"boxes": {"units": 4, "labels": [], "iou": {"crowd": 0.9, "raters": {"crowd": {"c1": 0.9}}}}})
    {'boxes': {'units': 4, 'labels': [], 'iou': {'crowd': 0.9}}}
    """
    out = {}
    for question, entry in section.items():
        entry = dict(entry)
        if isinstance(entry.get("iou"), Mapping):
            entry["iou"] = {k: v for k, v in entry["iou"].items() if k != "raters"}
        out[str(question)] = entry
    return out


def of_summary(summary: Mapping[str, Any], expanded: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The span / box section of a run summary or a stored record (None when it has none).

    A summary that holds ``units`` gives it; a record gives the section kept with its decision (:func:`recorded`:
    the per-label agreement computed on the units it measured), updated with ``expanded``, :func:`expand`'s account
    of the request being answered — what it read and the matched IoU per pool and per rater. A reused decision
    answers inputs with the same digest, whose units are the decided ones, so it shows what a fresh decision on
    them shows, without measuring them again.

    >>> record = {"validation": {"units": {"ner": {"kind": "spans", "units": 9, "labels": [{"label": "PER"}]}}}}
    >>> of_summary(record, {"ner": {"kind": "spans", "units": 9, "rows": {"crowd": 3}}})["ner"]["labels"]
    [{'label': 'PER'}]
    >>> of_summary({"validation": {}}) is None
    True
    """
    direct = summary.get("units")
    if isinstance(direct, Mapping):
        return dict(direct)
    validation = summary.get("validation")
    stored = validation.get(RECORD_KEY) if isinstance(validation, Mapping) else None
    if not isinstance(stored, Mapping):
        return None
    fresh = expanded or {}
    return {str(q): {**dict(entry), **dict(fresh.get(q) or {}), "labels": list(dict(entry).get("labels") or [])}
            for q, entry in stored.items() if isinstance(entry, Mapping)}
