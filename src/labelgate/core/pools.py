"""One long table with a pool (replication) column split into the arguments of one `Ratings` per pool.

Each column is factorised once for the whole table (:mod:`labelgate.core.columns`); all pools share one
category list (explicit, or the union of the observed labels) and one item index — every item of the table,
rated by the pool or not — so that cross-replication metrics align items by code without matching ids.
numpy only; :func:`labelgate.core.ratings.ratings_by_pool` builds the `Ratings` from these arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from labelgate.core.build import DuplicatePolicy, MissingPolicy, RowSubset, assemble, check_ids, require_columns
from labelgate.core.categories import Level, resolve_categories
from labelgate.core.column import Column, IntArray, int64_codes, python_scalar, used_codes
from labelgate.core.columns import factorize, visits_objects
from labelgate.core.parallel import run_steps


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
    n_rows = len(data[item])
    # four independent steps (threads on large tables): the item column, the most costly, on its own; the
    # others each with the pass that follows its coding
    steps: list[Callable[[], Any]] = [partial(factorize, data[item]), partial(factorize, data[rater]),
                                      partial(_values_present, data[value]), partial(_pools_positions, data[pool])]
    items, raters, (values, present), (pools, positions) = run_steps(
        steps, n_rows, holds_interpreter_lock=[visits_objects(data[c]) for c in (item, rater, value, pool)])
    check_ids(((item, items), (rater, raters), (pool, pools)), row_labels)
    if categories is None:  # one category list for all pools: the union of the observed labels
        categories, _ = resolve_categories(values.uniques[present], None, level, value)
    item_index = items.label_index()  # one index for every pool: items align by code; ids made when first read

    def pool_part(code: int) -> dict[str, Any]:
        # a pool's rows (with one pool, every row as it is): one gather per column by their positions, into the
        # int64 codes of its Ratings
        rows = positions[code]

        def part(column: Column) -> Column:
            return column if rows is None else column.with_codes(int64_codes(column.codes, rows))

        return assemble(
            part(items), part(raters), part(values), level=level, categories=categories, duplicates=duplicates,
            missing=missing, value_column=value,
            row_labels=row_labels if rows is None else RowSubset(row_labels, rows), shared_item_index=item_index,
            every_id_used=rows is None)

    parts = run_steps([partial(pool_part, code) for code in range(len(pools.uniques))], n_rows)
    return {python_scalar(name): part for name, part in zip(pools.uniques, parts, strict=True)}


def _values_present(column: Any) -> tuple[Column, npt.NDArray[np.bool_]]:
    """The coded label column, and which of its uniques a row holds (categories and dictionaries may hold
    values no row uses)."""
    values = factorize(column, ordered=False)
    return values, used_codes(values.codes, values.n_uniques)


def _pools_positions(column: Any) -> tuple[Column, list[IntArray | None]]:
    """The coded pool column and each pool's rows, ascending (None for a single pool: every row, no gather).

    Positions, then one gather per column: a boolean mask per column costs several times the gather on large
    tables (a branch per row).
    """
    pools = factorize(column)
    if len(pools.uniques) == 1:
        return pools, [None]
    return pools, [np.flatnonzero(pools.codes == code) for code in range(len(pools.uniques))]
