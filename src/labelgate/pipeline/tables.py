"""Every table LabelGate keeps in the results-store database, in one schema: the gate's runs, the monitor's state
and history, and the ledger of alert deliveries that both use.

These are the *current* shapes, used by queries. :mod:`labelgate.pipeline.migrations` creates and upgrades them
(one versioned chain); when a shape changes, add a migration step there and update the declaration here.

Timestamps of the monitor's judgements and windows are integers (microseconds since 1970-01-01 UTC), so that
window queries are index range scans on every backend; datetimes shown to users are converted at the edge.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

schema_version_table = Table(
    "labelgate_schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", String(200), nullable=False),
    Column("applied_at", DateTime(timezone=True), nullable=False),
)

# --- the gate ------------------------------------------------------------------------------------------------

# The audit log: one row per gate request, only ever appended (labelgate.pipeline.store).
runs_table = Table(
    "labelgate_runs",
    metadata,
    Column("run_id", String(36), primary_key=True),
    Column("batch_id", String(512), nullable=False),
    Column("batch_hash", String(128), nullable=False),
    Column("trusted_hash", String(128), nullable=True),
    Column("config_hash", String(128), nullable=False),
    Column("inputs_digest", String(128), nullable=False),
    Column("labelgate_version", String(40), nullable=False),
    Column("reused_from", String(36), nullable=True),  # the run whose decision this request received
    Column("decision", String(16), nullable=False),
    Column("reasons", JSON, nullable=False),
    Column("metrics", JSON, nullable=False),
    Column("coverage", JSON, nullable=False),
    Column("validation", JSON, nullable=False),
    Column("timing", JSON, nullable=False),
    Column("reports", JSON, nullable=False),
    Column("alerts", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Index("ix_labelgate_runs_created", "created_at"),
    Index("ix_labelgate_runs_batch", "batch_id", "created_at"),
    Index("ix_labelgate_runs_inputs", "inputs_digest", "created_at"),
)


# --- alerts: one row per (dedupe key, channel), for the gate and the monitor ------------------------------------

alert_deliveries_table = Table(
    "labelgate_alert_deliveries",
    metadata,
    Column("dedupe_key", String(200), primary_key=True),
    Column("channel", String(200), primary_key=True),
    Column("decision", String(16), nullable=False),
    Column("ok", Boolean, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("error", Text, nullable=True),
    Column("sent_at", DateTime(timezone=True), nullable=True),
    # the claim of the call sending it now (a token), and when it was taken; cleared with the outcome
    Column("claim", String(36), nullable=True),
    Column("claimed_at", DateTime(timezone=True), nullable=True),
)

# --- the monitor ---------------------------------------------------------------------------------------------

monitors_table = Table(
    "labelgate_monitor_monitors",
    metadata,
    Column("monitor", String(100), primary_key=True),
    Column("source_watermark", BigInteger, nullable=True),
    Column("config_hash", String(64), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

streams_table = Table(
    "labelgate_monitor_streams",
    metadata,
    Column("stream_id", Integer, primary_key=True, autoincrement=True),
    Column("monitor", String(100), nullable=False),
    Column("question", String(200), nullable=False),
    Column("level", String(16), nullable=False),
    Column("categories", JSON, nullable=False),
    Column("center", Float, nullable=True),
    Column("n_seq", BigInteger, nullable=False, default=0),
    Column("first_ts", BigInteger, nullable=True),
    Column("watermark", BigInteger, nullable=True),
    Column("closed_until", BigInteger, nullable=True),  # windows below this index are closed and stored
    Column("state", JSON, nullable=False),  # maintained sums of the cumulative metrics
    Column("updated_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("monitor", "question", name="uq_labelgate_monitor_streams"),
)

judgements_table = Table(
    "labelgate_monitor_judgements",
    metadata,
    Column("stream_id", Integer, primary_key=True),
    Column("item_id", String(200), primary_key=True),
    Column("pool", SmallInteger, primary_key=True),  # 0 crowd, 1 trusted
    Column("rater_id", String(200), primary_key=True),
    Column("code", Integer, nullable=False),
    Column("value", Float, nullable=True),
    Column("ts", BigInteger, nullable=False),
    Column("seq", BigInteger, nullable=False),  # crowd merge order (-1 for trusted)
    Column("delivery_no", Integer, nullable=False),
    Index("ix_labelgate_monitor_judgements_ts", "stream_id", "ts"),
    Index("ix_labelgate_monitor_judgements_seq", "stream_id", "seq"),
    sqlite_with_rowid=False,
)

#: The raw boxes of a ``kind: boxes`` question (one row per box; a rater who drew nothing on an image: one row with
#: empty coordinates and label): the objects of an image group every rater's boxes of it, so the monitor regroups an
#: image from these whenever a box of it arrives (``labelgate.monitor.boxes``). ``box`` numbers a rater's boxes of an
#: image in delivery order; ``label`` is the box's label as read (JSON: text or number).
boxes_table = Table(
    "labelgate_monitor_boxes",
    metadata,
    Column("stream_id", Integer, primary_key=True),
    Column("item_id", String(200), primary_key=True),
    Column("pool", SmallInteger, primary_key=True),
    Column("rater_id", String(200), primary_key=True),
    Column("box", Integer, primary_key=True),
    Column("x", Float, nullable=True),
    Column("y", Float, nullable=True),
    Column("width", Float, nullable=True),
    Column("height", Float, nullable=True),
    Column("label", JSON, nullable=True),
    Column("ts", BigInteger, nullable=False),
    Column("delivery_no", Integer, nullable=False),
    sqlite_with_rowid=False,
)

deliveries_table = Table(
    "labelgate_monitor_deliveries",
    metadata,
    Column("delivery_no", Integer, primary_key=True, autoincrement=True),
    Column("monitor", String(100), nullable=False),
    Column("delivery_id", String(500), nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("size", BigInteger, nullable=True),
    Column("mtime_ns", BigInteger, nullable=True),
    Column("status", String(20), nullable=False),  # merged | duplicate | empty
    Column("n_rows", Integer, nullable=False, default=0),
    Column("n_new", Integer, nullable=False, default=0),
    Column("n_already", Integer, nullable=False, default=0),
    Column("n_conflicts", Integer, nullable=False, default=0),
    Column("n_invalid", Integer, nullable=False, default=0),
    Column("n_late", Integer, nullable=False, default=0),
    Column("pass_id", String(36), nullable=False),
    Column("merged_at", DateTime(timezone=True), nullable=False),
    Index("ix_labelgate_monitor_deliveries_id", "monitor", "delivery_id"),
    Index("ix_labelgate_monitor_deliveries_hash", "monitor", "content_hash"),
)

raters_table = Table(
    "labelgate_monitor_raters",
    metadata,
    Column("stream_id", Integer, primary_key=True),
    Column("pool", SmallInteger, primary_key=True),
    Column("rater_id", String(200), primary_key=True),
    Column("q", Integer, nullable=False),  # number of categories the sums were laid out for
    Column(
        "sums", LargeBinary, nullable=False
    ),  # float64: n_ratings, trusted (S, M, n), loo (S, M, n), pairs
    Column("row", JSON, nullable=True),  # the per-rater row (report contract), refreshed when it changes
    Column("flagged", Boolean, nullable=False, default=False),
    Index("ix_labelgate_monitor_raters_flagged", "stream_id", "flagged"),
    sqlite_with_rowid=False,
)

pairs_table = Table(
    "labelgate_monitor_pairs",
    metadata,
    Column("stream_id", Integer, primary_key=True),
    Column("pool", SmallInteger, primary_key=True),
    Column("rater_a", String(200), primary_key=True),
    Column("rater_b", String(200), primary_key=True),
    Column("n", Integer, nullable=False),
    Column("agree", Integer, nullable=False),
    Column("candidate", Boolean, nullable=False, default=False),  # n >= min_pair_items: tested every pass
    sqlite_with_rowid=False,
)
# The candidate pairs a pass re-tests, read from an index that holds them alone (partial) with every column the test
# reads (covering): the read costs the candidates, not the pairs tallied so far, and tallying a non-candidate pair
# writes no index page. (A full (stream_id, candidate) index was not chosen by SQLite's planner over the primary key,
# which made the read a scan of every pair.)
_CANDIDATE = pairs_table.c.candidate.is_(True)
Index(
    "ix_labelgate_monitor_pairs_candidates",
    pairs_table.c.stream_id,
    pairs_table.c.candidate,
    pairs_table.c.n,
    pairs_table.c.agree,
    sqlite_where=_CANDIDATE,
    postgresql_where=_CANDIDATE,
)

# The tallies a pass adds, kept apart until they are folded into ``labelgate_monitor_pairs`` (fewer than
# ``labelgate.monitor.rater_store.FOLD_ROWS`` rows a stream between passes; a pass that adds many pairs holds more
# until the fold at its end): a pass writes the pages of this small table instead of
# scattering its tallies over the pages of every pair tallied so far. ``base_n`` and ``base_agree`` copy the pair's row
# of the main table (which does not change until the fold); ``candidate``: ``base_n + n >= min_pair_items``.
pair_deltas_table = Table(
    "labelgate_monitor_pair_deltas",
    metadata,
    Column("stream_id", Integer, primary_key=True),
    Column("pool", SmallInteger, primary_key=True),
    Column("rater_a", String(200), primary_key=True),
    Column("rater_b", String(200), primary_key=True),
    Column("n", Integer, nullable=False),
    Column("agree", Integer, nullable=False),
    Column("base_n", Integer, nullable=False),
    Column("base_agree", Integer, nullable=False),
    Column("candidate", Boolean, nullable=False),
    sqlite_with_rowid=False,
)

_DELTA_CANDIDATE = pair_deltas_table.c.candidate.is_(True)
Index(
    "ix_labelgate_monitor_pair_deltas_candidates",
    pair_deltas_table.c.stream_id,
    pair_deltas_table.c.candidate,
    pair_deltas_table.c.n,
    pair_deltas_table.c.agree,
    pair_deltas_table.c.base_n,
    pair_deltas_table.c.base_agree,
    sqlite_where=_DELTA_CANDIDATE,
    postgresql_where=_DELTA_CANDIDATE,
)

windows_table = Table(
    "labelgate_monitor_windows",
    metadata,
    Column("row_id", Integer, primary_key=True, autoincrement=True),
    Column("monitor", String(100), nullable=False),
    Column("question", String(200), nullable=False),
    Column("metric", String(64), nullable=False),
    Column("scope", String(16), nullable=False),  # window | cumulative
    Column("window_index", BigInteger, nullable=True),
    Column("window_start", BigInteger, nullable=False),
    Column("window_end", BigInteger, nullable=False),
    Column("value", Float, nullable=True),
    Column("ci_low", Float, nullable=True),
    Column("ci_high", Float, nullable=True),
    Column("n_items", Integer, nullable=False),
    Column("n_ratings", Integer, nullable=False),
    Column("threshold", Float, nullable=True),
    Column("pass_id", String(36), nullable=False),
    Index("ix_labelgate_monitor_windows_series", "monitor", "question", "metric", "scope", "window_end"),
)

detectors_table = Table(
    "labelgate_monitor_detectors",
    metadata,
    Column("monitor", String(100), primary_key=True),
    Column("question", String(200), primary_key=True),
    Column("metric", String(64), primary_key=True),
    Column("state", JSON, nullable=False),
)

episodes_table = Table(
    "labelgate_monitor_episodes",
    metadata,
    Column("episode_id", String(40), primary_key=True),
    Column("monitor", String(100), nullable=False),
    Column("question", String(200), nullable=False),
    Column("metric", String(64), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("opened_at", BigInteger, nullable=False),
    Column("closed_at", BigInteger, nullable=True),
    Column("reason", Text, nullable=False),
    Column("close_reason", Text, nullable=True),
    Column("worst_raters", JSON, nullable=False),
    Column("details", JSON, nullable=False),
    Column("alerts_done", Boolean, nullable=False, default=False),  # every transition alerted everywhere
    Index("ix_labelgate_monitor_episodes_monitor", "monitor", "opened_at"),
    Index("ix_labelgate_monitor_episodes_pending", "monitor", "alerts_done"),
)

passes_table = Table(
    "labelgate_monitor_passes",
    metadata,
    Column("pass_id", String(36), primary_key=True),
    Column("monitor", String(100), nullable=False),
    Column("status", String(16), nullable=False),  # ok | error
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Column("summary", JSON, nullable=False),
    Index("ix_labelgate_monitor_passes_monitor", "monitor", "started_at"),
)

