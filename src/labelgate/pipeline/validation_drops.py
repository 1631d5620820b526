"""Rows that pass validation but hold no judgement of a configured question, counted with their cause.

Validation quarantines the rows that break a rule; some valid rows still hold nothing to measure, and the
measurement leaves them out (:func:`labelgate.pipeline.sources.question_frame`). Nothing is dropped silently, so
:func:`left_out` counts them for the validation summary, by cause:

* ``"label empty (question 'q')"`` — with several questions in their own label columns, a row without a label for
  ``q`` (the question was not answered on that row; with one question an empty label is a validation failure);
* ``"question 'x' not configured"`` — with a question column, the rows of a question the configuration does not
  list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from labelgate.pipeline.sources.pools import question_value

if TYPE_CHECKING:
    import pandas as pd

    from labelgate.pipeline.config import GateConfig

#: Unconfigured question values named one by one; the rest are summed under one cause.
_NAMED = 10


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
    counts = other.astype(str).value_counts()
    for value, n in counts.iloc[:_NAMED].items():
        out[f"question {value!r} not configured"] = int(n)
    rest = int(np.sum(counts.iloc[_NAMED:].to_numpy()))
    if rest:
        out[f"{len(counts) - _NAMED} more questions not configured"] = rest
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
