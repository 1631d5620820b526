"""One long table with a pool (replication) column split into the arguments of one `Ratings` per pool.

Each column is factorised once for the whole table (:mod:`labelgate.core.columns`); all pools share one
category list (explicit, or the union of the observed labels) and one item index — every item of the table,
rated by the pool or not — so that cross-replication metrics align items by code without matching ids.
numpy only; :func:`labelgate.core.ratings.ratings_by_pool` builds the `Ratings` from these arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from labelgate.core.build import DuplicatePolicy, MissingPolicy, RowSubset, assemble, check_ids, require_columns
from labelgate.core.categories import Level, resolve_categories
from labelgate.core.columns import Column, factorize, python_scalar


def pool_arguments(data: Any, pool: str, item: str, rater: str, value: str, *, level: Level,
                   categories: Sequence[Any] | None, duplicates: DuplicatePolicy, missing: MissingPolicy,
                   ) -> dict[Any, dict[str, Any]]:
    """``{pool name: keyword arguments of Ratings(...)}`` in order of first appearance of the pools.

    Raises
    ------
    InputError
        A missing column, an empty table, a missing item / rater / pool id (naming the column and the row), and
        every error of :func:`labelgate.core.build.assemble` within a pool (duplicates, unknown categories, ...).
    """
    require_columns(data, (("pool", pool), ("item", item), ("rater", rater), ("value", value)))
    row_labels = getattr(data, "index", None)
    items, raters, values, pools = (factorize(data[c], ordered=c != value) for c in (item, rater, value, pool))
    check_ids(((item, items), (rater, raters), (pool, pools)), row_labels)
    if categories is None:  # one category list for all pools: the union of the observed labels
        present = np.bincount(values.codes[values.codes >= 0], minlength=len(values.uniques)) > 0
        categories, _ = resolve_categories(values.uniques[present], None, level, value)
    result: dict[Any, dict[str, Any]] = {}
    for code, name in enumerate(pools.uniques):
        # a pool's rows by a mask (sequential copies, no row-number array); with one pool, every row as it is
        rows = None if len(pools.uniques) == 1 else pools.codes == code

        def part(column: Column, rows: Any = rows) -> Column:
            codes = column.codes if rows is None else column.codes[rows]
            return Column.deferred(codes, lambda: column.uniques)  # item labels made after the duplicate check

        result[python_scalar(name)] = assemble(
            part(items), part(raters), part(values), level=level, categories=categories, duplicates=duplicates,
            missing=missing, value_column=value,
            row_labels=row_labels if rows is None else RowSubset(row_labels, rows), shared_item_index=True)
    return result
