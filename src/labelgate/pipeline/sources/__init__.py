"""Where judgements come from, for the gate and the monitor.

``tables``: one table from a CSV / Parquet file or a SQL query, ids as strings, a content hash. ``sql``: the one
reader of a database named by an environment variable. ``pools``: the gate's crowd and trusted replications and
one question's judgements in canonical columns. ``deliveries``: what arrived since the last look (a drop folder,
a Parquet dataset or a SQL table read past a watermark), each delivery with its content hash. ``label_studio``: one
control of a Label Studio project or JSON export as the long table (:func:`read_label_studio`).
"""

from labelgate.pipeline.sources.label_studio import read_label_studio
from labelgate.pipeline.sources.pools import (
    ITEM,
    LABEL,
    POOL,
    RATER,
    TIMESTAMP,
    combined,
    load_pools,
    question_frame,
    question_value,
)
from labelgate.pipeline.sources.tables import as_str, batch_id_of, content_hash, load_table

__all__ = ["ITEM", "LABEL", "POOL", "RATER", "TIMESTAMP", "as_str", "batch_id_of", "combined", "content_hash",
           "load_pools", "load_table", "question_frame", "question_value", "read_label_studio"]
