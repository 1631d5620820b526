"""Rows that pass validation but hold no judgement of a configured question, counted with their cause.

Validation quarantines the rows that break a rule; some valid rows still hold nothing to measure, and the
measurement leaves them out (:func:`labelgate.pipeline.sources.question_frame`). Nothing is dropped silently, so
:func:`left_out` counts them for the validation summary, by cause:

* ``"label empty (question 'q')"`` — with several questions in their own label columns, a row without a label for
  ``q`` (the question was not answered on that row; with one question an empty label is a validation failure);
* ``"question 'x' not configured"`` — with a question column, the rows of a question the configuration does not
  list;
* ``"pool 'x' not configured"`` — rows whose pool value is set but is none of the configured pools (``pools.crowd``,
  ``pools.trusted``), with ``pools.unknown: leave_out`` (the default): another vendor's rows in a combined export.
  Validation takes them out before checking (:func:`outside_pools`), so they count in neither ``n_rows`` nor
  ``n_invalid``; the database path counts them with the same causes (:func:`pool_causes`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from labelgate.pipeline.sources.pools import question_value
from labelgate.pipeline.sources.tables import as_str

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pandas as pd

    from labelgate.pipeline.config import GateConfig

#: Unconfigured question or pool values named one by one; the rest are summed under one cause.
NAMED = 10


def left_out(valid: pd.DataFrame, config: GateConfig) -> dict[str, int]:
    """The valid rows each cause leaves out of the measurement (causes with no row are not listed).

    Examples
    --------
    >>> import pandas as pd
    >>> from labelgate.pipeline.config import GateConfig
    >>> cfg = GateConfig.model_validate({"questions": [{"name": "a", "label_column": "a"},
    ...                                                {"name": "b", "label_column": "b"}]})
    >>> rows = pd.DataFrame({"a": ["x", None, None], "b": ["y", "y", None]})
    >>> left_out(rows, cfg)
    {"label empty (question 'a')": 2, "label empty (question 'b')": 1}
    """
    cols = config.columns
    out: dict[str, int] = {}
    if cols.question is None:
        if len(config.questions) < 2:  # one question: an empty label fails validation instead
            return out
        for q in config.questions:
            column = config.label_column(q)
            if column in valid.columns:
                n = int(valid[column].isna().to_numpy(dtype=bool).sum())
                if n:
                    out[f"label empty (question {q.name!r})"] = n
        return out
    if cols.question not in valid.columns:
        return out
    names = valid[cols.question].astype(object)
    known = {question_value(config, q) for q in config.questions}
    other = names[~names.isin(known).to_numpy(dtype=bool)]
    if other.empty:
        return out
    return _named(other.astype(str), "question", "questions")


def outside_pools(pools: pd.Series, config: GateConfig) -> np.ndarray:
    """Where a row's pool value is set, not empty, and none of the configured pools (as text, as ids are read).

    Only with ``pools.unknown: leave_out``; with ``invalid`` nothing is outside and validation quarantines them.

    >>> import pandas as pd
    >>> from labelgate.pipeline.config import GateConfig
    >>> outside_pools(pd.Series(["crowd", "vendor-b", None, "", "trusted"]), GateConfig()).tolist()
    [False, True, False, False, False]
    """
    if config.pools.unknown != "leave_out":
        return np.zeros(len(pools), dtype=bool)
    text = as_str(pools).astype(object)
    known = {config.pools.crowd, config.pools.trusted, ""}
    return (text.notna() & ~text.isin(known)).to_numpy(dtype=bool)


def pool_causes(top: Sequence[tuple[str, int]], n_values: int, n_rows: int) -> dict[str, int]:
    """The causes of rows outside the configured pools: the :data:`NAMED` commonest values by name, the rest summed.

    ``top`` holds the commonest values with their rows (most rows first, ties by value), ``n_values`` the distinct
    values and ``n_rows`` their rows in all: what a table's value counts or a database's ``GROUP BY`` give.

    >>> pool_causes([("vendor-b", 40), ("pilot", 3)], 2, 43)
    {"pool 'vendor-b' not configured": 40, "pool 'pilot' not configured": 3}
    """
    out = {f"pool {value!r} not configured": int(n) for value, n in list(top)[:NAMED]}
    rest = int(n_rows) - sum(out.values())
    if rest:
        out[f"{int(n_values) - len(out)} more pools not configured"] = rest
    return out


def outside_pool_causes(pools: pd.Series) -> dict[str, int]:
    """:func:`pool_causes` of the pool values of the rows outside the configured pools (:func:`outside_pools`)."""
    if pools.empty:
        return {}
    counts = as_str(pools).astype(object).value_counts()
    order = sorted(counts.items(), key=lambda kv: (-int(kv[1]), str(kv[0])))
    return pool_causes([(str(v), int(n)) for v, n in order[:NAMED]], len(counts), int(counts.sum()))


def _named(values: pd.Series, one: str, many: str) -> dict[str, int]:
    """``"<one> 'x' not configured"`` for the :data:`NAMED` commonest values, the rest summed."""
    counts = values.value_counts()
    out = {f"{one} {value!r} not configured": int(n) for value, n in counts.iloc[:NAMED].items()}
    rest = int(np.sum(counts.iloc[NAMED:].to_numpy()))
    if rest:
        out[f"{len(counts) - NAMED} more {many} not configured"] = rest
    return out


def left_out_text(counts: dict[str, int]) -> str:
    """``"; 178 valid rows hold no judgement and are left out (label empty (question 'x') 27, ...)"`` or ``""``.

    A row left out for two questions counts in both causes, so the causes are listed, not summed, when there are
    several label columns.

    >>> left_out_text({"label empty (question 'a')": 27, "label empty (question 'b')": 151})
    "; left out of the measurement: label empty (question 'a') 27 rows, label empty (question 'b') 151 rows"
    >>> left_out_text({})
    ''
    """
    if not counts:
        return ""
    return "; left out of the measurement: " + ", ".join(f"{cause} {n} rows" for cause, n in counts.items())


def with_left_out(reason: str, counts: dict[str, int]) -> str:
    """The validation policy's sentence with the rows left out of the measurement, so "all rows passed" never hides
    them (the file path and the database path word it alike).

    >>> with_left_out("All 3 rows of the crowd table passed validation.", {"pool 'x' not configured": 2})
    "All 3 rows of the crowd table passed validation; left out of the measurement: pool 'x' not configured 2 rows."
    """
    if not counts:
        return reason
    return f"{reason.rstrip('.')}{left_out_text(counts)}."
