"""The gate configuration's sections (pydantic v2, strict): sources, columns, questions, gates, interval, store...

Unknown keys and invalid values are errors naming the key path and the file. Secrets never live in the
file: SQL URLs and webhook URLs are read from environment variables (``url_env``) or Prefect blocks
(``block``). See ``configs/example.yaml`` for a commented example.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from labelgate.core.estimate import DEFAULT_N_BOOT
from labelgate.errors import LabelGateError, Reason
from labelgate.pipeline.limits import MAX_CATEGORIES, MAX_N_BOOT

Level = Literal["nominal", "ordinal", "interval", "ratio", "set"]
#: What one judgement is: a label (a category, level or number; sets with ``level: set``), spans over a text, or
#: boxes on an image (docs/validation.md, "Spans and boxes").
Kind = Literal["labels", "spans", "boxes"]
SetDistance = Literal["jaccard", "masi"]
#: The label of a unit where a rater marked nothing: a text position no span covers, an object a rater drew no box
#: for (the core's, :meth:`labelgate.Ratings.from_spans` / :meth:`~labelgate.Ratings.from_boxes`).
UNIT_LABELS = {"spans": "O", "boxes": "none"}
Decision = Literal["ACCEPT", "REJECT", "REVIEW", "ERROR"]
GateType = Literal["normalized_cross_kappa", "cross_kappa", "irr_baseline", "labeler_icc", "spa"]
IrrName = Literal["krippendorff_alpha", "fleiss_kappa", "conger_kappa", "gwet_ac"]
SpaWeighting = Literal["flat", "annotations", "annotations_m1", "edges", "inv_var", "inv_var_class"]
#: A value a row selection (``batch.where``) compares a column with, as text (bool is refused: YAML reads ``no`` as
#: false, which would silently select the text "False").
SelectValue = StrictStr | StrictInt
RaterAction = Literal["warn", "review", "exclude"]


class ConfigError(LabelGateError, ValueError):
    """The gate configuration is invalid (names the file and the key)."""

    default_code = Reason.INVALID_PARAMETER


#: Every configuration model refuses unknown keys and is immutable once validated; no number in a configuration
#: may be NaN or infinite (``.nan`` passed as a threshold once failed only in the measure step, after the load).
STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class _Strict(BaseModel):
    model_config = STRICT


#: The settings a SQL source's ``session`` may give its validating transaction (memory, parallelism, a time limit).
SESSION_SETTINGS = ("work_mem", "hash_mem_multiplier", "max_parallel_workers_per_gather", "statement_timeout", "jit")


class Source(_Strict):
    """Where a table comes from: a CSV/Parquet path, a SQL query on a database named by an env var, or a Label Studio
    project (``format: label_studio``: an export file or project URL in ``path``, or the server URL in ``url_env``
    with ``project``; one ``control``; the ``trusted`` annotators; the token in ``token_env``; a batch of ``tasks``, a
    data manager ``view`` or a time range ``annotated_after`` / ``annotated_before``: docs/label-studio.md)."""

    path: str | None = None
    format: Literal["auto", "csv", "parquet", "sql", "label_studio"] = "auto"
    query: str | None = None
    url_env: str | None = Field(default=None, description="Environment variable holding the SQLAlchemy URL.")
    # One export may hold several pools or vendors: the selection gates one of them, and the rows outside it are
    # counted, not quarantined (they are not errors, just another gate's rows).
    where: dict[str, SelectValue | list[SelectValue]] | None = Field(
        default=None, description="Row selection: column -> value or list of values (compared as text).")
    params: dict[str, SelectValue] | None = Field(
        default=None, description="Values bound to the query's :name placeholders (never spliced into the SQL).")
    aggregate: bool = Field(
        default=False, description="format 'sql': validate and compute the statistics in the database; only "
        "aggregates, failing rows and coded judgements reach the client (docs/validation.md).")
    session: dict[str, StrictStr | StrictInt] | None = Field(
        default=None, description="format 'sql' with aggregate: PostgreSQL settings of the validating transaction "
        "only (set_config(..., is_local)), e.g. {work_mem: 256MB}; the server's configuration is not changed. "
        f"Names: {', '.join(SESSION_SETTINGS)} (docs/validation.md).")
    # Label Studio (format: label_studio); the server's token stays in the environment like a database URL.
    project: int | None = Field(default=None, description="Label Studio project id (with url_env).")
    control: str | list[str] | None = Field(
        default=None, description="Label Studio control name (the results' from_name), or a list of them: one "
        "question per control, each read by the question whose label_column names it.")
    trusted: Literal["ground_truth"] | list[SelectValue] = Field(
        default="ground_truth", description="Label Studio trusted pool: ground-truth annotations, or annotator ids "
        "or e-mails.")
    token_env: str | None = Field(default=None, description="Environment variable holding the Label Studio token "
                                                            "(default LABEL_STUDIO_TOKEN).")
    label_config: str | None = Field(default=None, description="Labeling config (XML file) of a Label Studio export "
                                                               "file.")
    write_back: bool = Field(default=False, description="Write the decision into the Label Studio tasks' meta.")
    # Label Studio batch: a task filter (ids or a data manager view) or a time range of the crowd's annotations.
    tasks: list[StrictInt] | None = Field(default=None, min_length=1, max_length=100_000,
                                          description="Label Studio batch: these task ids.")
    view: int | None = Field(default=None, description="Label Studio batch: the tasks of this data manager view (tab).")
    annotated_after: datetime | None = Field(default=None, description="Label Studio batch: crowd annotations at or "
                                                                       "after this time (ISO; naive is UTC).")
    annotated_before: datetime | None = Field(default=None, description="Label Studio batch: crowd annotations "
                                                                        "before this time.")
    time_field: Literal["updated_at", "created_at"] = Field(default="updated_at", description="Label Studio batch: "
                                                            "the annotations' time the range applies to.")

    @field_validator("where")
    @classmethod
    def _where_columns(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for column, wanted in (value or {}).items():
            if not str(column).strip():
                raise ValueError("a row selection names a column by a non-empty name")
            if isinstance(wanted, list) and not wanted:
                raise ValueError(f"the selection of column {column!r} lists no value (it would select no row)")
        return value

    @model_validator(mode="after")
    def _sql_needs_query_and_url(self) -> Source:
        if self.format == "sql" and not (self.query and self.url_env):
            raise ValueError("format 'sql' needs both 'query' and 'url_env' (the environment variable that holds "
                             "the database URL)")
        if self.aggregate and self.format != "sql":
            raise ValueError("'aggregate' computes a SQL source's statistics in its database: it needs format 'sql'")
        if self.session is not None:
            if not self.aggregate:
                raise ValueError("'session' sets the database's settings for the aggregate queries: it needs "
                                 "'aggregate: true'")
            for name, value in self.session.items():
                if name not in SESSION_SETTINGS or len(str(value)) > 64:
                    raise ValueError(f"'session' sets one of {list(SESSION_SETTINGS)} to a value of at most 64 "
                                     f"characters; got {name!r}: {str(value)[:80]!r}")
        if self.format == "label_studio" and not self.control:
            raise ValueError("format 'label_studio' needs 'control' (the name of the labeling config's Choices / "
                             "Rating / Number / Taxonomy / Labels / RectangleLabels control to gate, or a list of "
                             "them)")
        if isinstance(self.control, list) and (len(set(self.control)) != len(self.control) or len(self.control) > 100
                                               or not all(c.strip() for c in self.control)):
            raise ValueError(f"'control' lists 1 to 100 distinct non-empty control names; got {self.control}")
        after, before = (t if t is None or t.tzinfo else t.replace(tzinfo=UTC)  # naive times are UTC
                         for t in (self.annotated_after, self.annotated_before))
        if after is not None and before is not None and after >= before:
            raise ValueError(f"annotated_after ({self.annotated_after}) must be before annotated_before "
                             f"({self.annotated_before})")
        unknown = set(self.params or {}) - set(self.placeholders())
        if unknown:
            raise ValueError(f"params {sorted(unknown)} name no ':name' placeholder of the query "
                             f"(placeholders: {sorted(self.placeholders())})")
        return self

    def placeholders(self) -> list[str]:
        """The ``:name`` parameters of the query, in order of appearance."""
        return list(dict.fromkeys(re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", self.query or "")))


class Columns(_Strict):
    """Column names of the long-format tables."""

    item: str = "item_id"
    rater: str = "rater_id"
    label: str = "label"
    pool: str = "pool"
    question: str | None = None
    timestamp: str | None = None


class Pools(_Strict):
    """Pool values used when one table holds both replications, and what becomes of rows of any other pool."""

    crowd: str = "crowd"
    trusted: str = "trusted"
    # A combined export often carries a third pool (another vendor, a pilot round): its rows are not this gate's, so
    # by default they are left out of the measurement and counted by pool value, not quarantined (docs/validation.md).
    unknown: Literal["leave_out", "invalid"] = Field(
        default="leave_out", description="Rows whose pool value is set but is neither 'crowd' nor 'trusted': "
        "'leave_out' counts them in the validation summary (left_out) and measures without them; 'invalid' "
        "quarantines them as failing the pool check.")


class SpanColumns(_Strict):
    """The columns of a ``kind: spans`` question: one row per span, character offsets ``[start, end)`` (end
    exclusive, as Label Studio's), the span's label (``label_column``, default ``columns.label``) and the text's
    length; a rater who annotated a text and marked nothing has one row with empty ``start`` / ``end``."""

    start: str = "start"
    end: str = "end"
    length: str = Field(default="length", description="The column holding the text's length in characters.")
    unit: Literal["char", "token"] = Field(default="char", description="Measure per character, or per token.")
    tokens: str | None = Field(default=None, description="unit 'token': the column holding each text's token "
                                                         "offsets (default: whitespace tokens of the text).")


class BoxColumns(_Strict):
    """The columns of a ``kind: boxes`` question: one row per box (its label in ``label_column``, default
    ``columns.label``); a rater who annotated an image and drew nothing has one row with empty coordinates. Boxes of
    different raters are grouped into objects at IoU >= ``iou`` (``lg.Ratings.from_boxes``)."""

    x: str = "x"
    y: str = "y"
    width: str = "width"
    height: str = "height"
    iou: float = Field(default=0.5, gt=0, le=1, description="The least IoU of two boxes of one object.")


class Question(_Strict):
    """One question of the task: its label column (or its value in the question column), level, categories.

    ``kind`` says what one judgement is: ``labels`` (one value per item and rater: a category, level or number, or a
    set of categories with ``level: set`` and ``distance``), ``spans`` (text spans, columns in ``spans``) or
    ``boxes`` (image boxes, columns in ``boxes``). Spans and boxes are measured per unit (a position of a text, an
    object of an image) with nominal labels: ``categories`` then lists the span / box labels.
    """

    name: str
    label_column: str | None = None
    question_value: str | None = None
    level: Level = "nominal"
    categories: list[Any] | None = Field(default=None, max_length=MAX_CATEGORIES)
    kind: Kind = "labels"
    distance: SetDistance | None = Field(default=None, description="level 'set': the distance between two sets, "
                                                                   "'jaccard' or 'masi'.")
    sep: str | None = Field(default=None, min_length=1, max_length=8,
                            description="level 'set': the separator of a set written as text (a CSV cell); a "
                            "Parquet list or a Python set needs none.")
    spans: SpanColumns | None = None
    boxes: BoxColumns | None = None

    @model_validator(mode="before")
    @classmethod
    def _kind_defaults(cls, data: Any) -> Any:
        # `kind: spans` alone takes the default span columns (and likewise boxes)
        if isinstance(data, dict) and data.get("kind") in ("spans", "boxes") and data.get(data["kind"]) is None:
            data = {**data, data["kind"]: {}}
        return data

    @model_validator(mode="after")
    def _kind_and_level(self) -> Question:
        if self.level == "set":
            if self.kind != "labels":
                raise ValueError(f"'level: set' is a level of 'kind: labels'; a {self.kind} question is measured "
                                 "per unit with nominal labels (leave 'level' out)")
            if self.distance is None:
                raise ValueError("'level: set' needs 'distance' ('jaccard' or 'masi')")
        elif self.distance is not None or self.sep is not None:
            key = "distance" if self.distance is not None else "sep"
            raise ValueError(f"'{key}' applies to 'level: set' only (this question's level is {self.level!r})")
        if self.kind in ("spans", "boxes") and self.level != "nominal":
            raise ValueError(f"'kind: {self.kind}' is measured per unit with nominal labels; got level "
                             f"{self.level!r} (leave 'level' out)")
        for other in ("spans", "boxes"):
            if other != self.kind and getattr(self, other) is not None:
                raise ValueError(f"'{other}' (its columns) needs 'kind: {other}'; this question's kind is "
                                 f"{self.kind!r}")
        return self


#: Threshold keys of a gate, checked against :data:`THRESHOLD_RANGES`.
THRESHOLD_KEYS = ("min_value", "max_value", "tolerance", "min_ratio", "max_excess", "margin")

#: ``(gate type, key) -> (low, high, low inclusive, what)``: the values a threshold can take. κ-type coefficients,
#: α and normalized κx are compared with thresholds in [-1, 1]; SPA is a probability; a difference of two IRRs is
#: at most 2 apart; a ratio of IRRs is positive; the ICC gap lies in [0, 1] for a required margin.
THRESHOLD_RANGES: dict[tuple[str, str], tuple[float, float, bool, str]] = {
    ("normalized_cross_kappa", "min_value"): (-1.0, 1.0, True, "normalized κx"),
    ("cross_kappa", "min_value"): (-1.0, 1.0, True, "κx"),
    ("spa", "min_value"): (0.0, 1.0, True, "SPA, a probability"),
    ("spa", "max_value"): (0.0, 1.0, True, "SPA, a probability"),
    ("irr_baseline", "tolerance"): (0.0, 2.0, True, "an allowed shortfall of one IRR below another"),
    ("irr_baseline", "max_excess"): (0.0, 2.0, True, "an allowed excess of one IRR over another"),
    ("irr_baseline", "min_ratio"): (0.0, math.inf, False, "a ratio of two IRRs"),
    ("labeler_icc", "margin"): (0.0, 1.0, True, "a gap between two ICCs"),
}


def _check_threshold(gate_type: str, key: str, value: float | None) -> None:
    """Raise ``ValueError`` naming the range when a threshold is outside it (the loader adds the key and value)."""
    if value is None:
        return
    bounds = THRESHOLD_RANGES.get((gate_type, key))
    if bounds is None:
        if key == "margin" and value == 0.0:  # the default of every gate; only labeler_icc reads it
            return
        raise ValueError(f"not a threshold of gate type {gate_type!r}")
    low, high, closed, what = bounds
    inside = (low <= value if closed else low < value) and value <= high
    if not inside:
        span = f"{'[' if closed else '('}{low:g}, {high:g}]" if math.isfinite(high) else f"> {low:g}"
        raise ValueError(f"outside the range of {what}, {span}, for gate type {gate_type!r}")


def check_weights_setting(value: str | list[list[float]]) -> str | list[list[float]]:
    """A configured IRR weighting: a handbook name (:data:`labelgate.metrics.weights.WEIGHTS` or an alias) or a square
    matrix (its size and credits are checked against the question's categories when it is used). Raises
    ``ValueError`` (the loader adds the key)."""
    if isinstance(value, str):
        from labelgate.metrics.weights import ALIASES, WEIGHTS

        if value not in WEIGHTS and value not in ALIASES:
            raise ValueError(f"unknown weighting {value!r}; one of "
                             f"{', '.join(repr(w) for w in (*WEIGHTS, *ALIASES))}, or a q x q matrix")
    elif not value or any(len(row) != len(value) for row in value):
        raise ValueError("a weights matrix must be square: q rows of q credits, in the question's category order")
    return value


class Gate(_Strict):
    """One expectation with its thresholds.

    ``type`` selects the expectation: ``normalized_cross_kappa`` (``min_value``, ``irr``, ``weights``) /
    ``cross_kappa`` (``min_value``), ``irr_baseline`` (``tolerance`` or ``min_ratio``, optional ``max_excess``,
    ``irr``, ``weights``), ``labeler_icc`` (``margin``), ``spa`` (``min_value`` / ``max_value``, ``weighting``).
    ``weights`` is the IRR's agreement weighting (a handbook name, or a q x q matrix in the question's category
    order), passed to the expectation as its ``weights`` parameter.
    """

    type: GateType
    severity: Literal["blocking", "warning"] = "blocking"
    questions: list[str] | None = None
    min_value: float | None = None
    max_value: float | None = None
    tolerance: float | None = None
    min_ratio: float | None = None
    max_excess: float | None = None
    margin: float = 0.0
    irr: IrrName = "krippendorff_alpha"
    weights: StrictStr | list[list[float]] | None = None
    weighting: SpaWeighting = "annotations_m1"

    @field_validator("weights")
    @classmethod
    def _known_weights(cls, value: str | list[list[float]] | None, info: ValidationInfo) -> Any:
        if value is None:
            return value
        if info.data.get("type") not in ("normalized_cross_kappa", "irr_baseline"):
            raise ValueError(f"gate type {info.data.get('type')!r} has no IRR to weight; 'weights' applies to "
                             "'normalized_cross_kappa' and 'irr_baseline'")
        return check_weights_setting(value)

    @field_validator(*THRESHOLD_KEYS)
    @classmethod
    def _in_range(cls, value: float | None, info: ValidationInfo) -> float | None:
        # `type` is declared first, so it is validated (or failed) before any threshold
        if "type" in info.data and info.field_name is not None:
            _check_threshold(info.data["type"], info.field_name, value)
        return value

    @model_validator(mode="after")
    def _thresholds(self) -> Gate:
        needs = {"normalized_cross_kappa": ("min_value",), "cross_kappa": ("min_value",)}
        for key in needs.get(self.type, ()):
            if getattr(self, key) is None:
                raise ValueError(f"gate type {self.type!r} needs '{key}'")
        if self.type == "irr_baseline" and self.tolerance is None and self.min_ratio is None:
            raise ValueError("gate type 'irr_baseline' needs 'tolerance' or 'min_ratio'")
        if self.type == "spa" and self.min_value is None and self.max_value is None:
            raise ValueError("gate type 'spa' needs 'min_value' and/or 'max_value'")
        if self.min_value is not None and self.max_value is not None and self.min_value > self.max_value:
            raise ValueError(f"min_value {self.min_value} is greater than max_value {self.max_value}")
        return self


class Interval(_Strict):
    """Bootstrap settings shared by all expectations."""

    ci: float | None = Field(default=0.95, gt=0, lt=1)
    ci_method: Literal["auto", "bca", "delta", "percentile"] = Field(
        default="auto", description="Interval method: 'auto' (default: the method the coverage study chose for each "
        "metric, BCa except delta for normalized kappa_x; docs/benchmarks.md, 'Interval coverage'), 'bca', 'delta' "
        "or 'percentile'.")
    n_boot: int = Field(default=DEFAULT_N_BOOT, ge=2, le=MAX_N_BOOT)
    seed: int | None = 0
    use_ci_bound: bool = True
    # The per-rater diagnostics (whose flags the rater policy acts on) and the disattenuated correlation: their
    # bootstrap runs per rater and costs more per resample, hence a resample count of their own.
    diagnose_n_boot: int = Field(default=500, ge=2, le=MAX_N_BOOT,
                                 description="Resamples of the diagnose step's disattenuated correlation ρxy.")


class Validation(_Strict):
    """What to do with rows that fail validation (they are always quarantined, never dropped silently)."""

    on_invalid: Literal["reject", "continue"] = "reject"
    max_invalid_share: float = Field(default=0.0, ge=0, le=1)


class Coverage(_Strict):
    """Minimum overlap between the batch and the trusted replication (below it: REVIEW)."""

    min_coverage: float = Field(default=0.1, ge=0, le=1)
    min_common_items: int = Field(default=20, ge=1)


class RaterJudging(_Strict):
    """How raters are judged ``low_agreement`` (:mod:`labelgate.metrics.diagnostics.judging`), gate and monitor alike.

    A rater is flagged when the one-sided test of "its kappa is at least ``min_agreement``" is rejected by
    Benjamini-Hochberg across the raters of its pool and question at the false discovery rate ``fdr``. Every other
    rater shows the workload at which the test would flag a rater ``effect`` below the minimum with probability
    ``power`` (the defaults: a rater at chance, i.e. a spammer), and is "too few items to judge" until it has it.
    """

    min_agreement: float = Field(default=0.2, ge=-1, lt=1, description="The kappa a rater must reach.")
    min_shared_items: int = Field(default=10, ge=1, le=1_000_000, description=(
        "Trusted items a rater needs to be tested against the trusted pool (else against its co-raters, with as "
        "many co-rated items); also the least workload reported."))
    fdr: float = Field(default=0.1, gt=0, lt=1, description="False discovery rate of the low_agreement flags.")
    effect: float = Field(default=0.2, gt=0, le=2, description=(
        "How far below min_agreement a rater's true kappa must be for the reported workload to find it."))
    power: float = Field(default=0.8, ge=0.5, lt=1, description="Power of the reported workload.")


class RaterPolicy(RaterJudging):
    """What a rater flag does to the decision (the flags of :mod:`labelgate.metrics.diagnostics`), and how raters are
    judged (:class:`RaterJudging`).

    ``warn`` reports the flagged raters as a warning of the decision; ``review`` sends the batch to REVIEW naming
    them; ``exclude`` decides on the batch without their judgements (the rows excluded are listed in a file next to
    the report; the decision with them is kept in the record). Spammers, who guess, are flagged ``low_agreement``.
    """

    low_agreement: RaterAction = "warn"
    collusion: RaterAction = "warn"

    def actions(self) -> dict[str, str]:
        """``{flag: action}``: what each flag does."""
        return {"low_agreement": self.low_agreement, "collusion": self.collusion}

    @model_validator(mode="before")
    @classmethod
    def _known_flags(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(key in data for key in ("spammer", "spammers")):
            raise ValueError("there is no 'spammer' flag: a spammer's agreement with the trusted pool is below the "
                             "minimum, so it is flagged 'low_agreement'; set raters.low_agreement")
        return data


class Store(_Strict):
    """Results store: a SQLAlchemy URL (default a SQLite file), or an env var holding it."""

    url: str = "sqlite:///labelgate-results.db"
    url_env: str | None = None

    @model_validator(mode="after")
    def _no_password_in_file(self) -> Store:
        if "@" in self.url.split("//", 1)[-1].split("/", 1)[0]:
            raise ValueError("the store URL holds credentials; put it in an environment variable and name it in "
                             "'url_env'")
        return self


class Reports(_Strict):
    """Where reports, quarantine files and Data Docs are written."""

    dir: str = "reports"


class AlertChannel(_Strict):
    """One alert channel: a Prefect notification block by name, or a webhook/Slack URL held in an env var."""

    type: Literal["webhook", "slack", "prefect_block"]
    url_env: str | None = None
    block: str | None = None

    @model_validator(mode="after")
    def _target(self) -> AlertChannel:
        if self.type == "prefect_block" and not self.block:
            raise ValueError("channel type 'prefect_block' needs 'block' (the saved block's name)")
        if self.type in ("webhook", "slack") and not self.url_env:
            raise ValueError(f"channel type {self.type!r} needs 'url_env' (the environment variable holding the "
                             "URL; URLs are secrets and never belong in the file)")
        return self


class Alerts(_Strict):
    """When and where to alert."""

    notify_on: list[Decision] = ["REJECT", "REVIEW", "ERROR"]
    channels: list[AlertChannel] = []
    retries: int = Field(default=2, ge=0, le=10)
    timeout_seconds: float = Field(default=10.0, gt=0)


class DaskSettings(_Strict):
    """Where ``runner: dask`` runs: a running cluster (``address``) or a temporary LocalCluster."""

    address: str | None = Field(default=None, description="Scheduler address, e.g. tcp://dask-scheduler:8786.")
    n_workers: int = Field(default=2, ge=1, description="Worker processes of the temporary LocalCluster.")


class Serve(_Strict):
    """The ``serve`` section: what ``labelgate serve`` watches and when a dropped file counts as arrived.

    A file is read only once it is complete: with ``ready_marker`` once ``<file name>.ready`` exists next to it
    (the writer creates the marker after closing the file), otherwise once it was left unmodified for
    ``settle_seconds``. Relative paths resolve against the configuration file's folder.
    """

    watch: str | None = Field(default=None, description="The drop folder that `labelgate serve` gates.")
    pattern: str = Field(default="*", description="Glob of batch files under the drop folder (`**` recurses).")
    settle_seconds: float = Field(default=2.0, ge=0, le=86400,
                                  description="A file modified less than this long ago is still being written.")
    ready_marker: bool = Field(default=False, description="Gate a file only once `<file name>.ready` exists.")
    poll_seconds: float = Field(default=1.0, gt=0, le=3600, description="Seconds between two looks at the folder.")
    after: Literal["keep", "move", "delete"] = Field(default="keep", description="What happens to a gated file.")
    move_to: str | None = Field(default=None, description="Folder of gated files with `after: move`.")
    state: str | None = Field(default=None, description="The served gate's file ledger (SQLite; default "
                                                        "`<reports.dir>/labelgate-serve.db`).")
    max_attempts: int = Field(default=3, ge=1, le=100,
                              description="Runs interrupted (server killed) before a batch is recorded as ERROR.")
    events: bool = Field(default=True, description="Prefect events in and out when PREFECT_API_URL is set.")
    roots: list[str] = Field(default=[], max_length=100,
                             description="Folders besides the drop folder (and the folder of `batch.path`) whose "
                                         "files a `labelgate.batch.ready` event may name; a path outside them is "
                                         "an ERROR and is not read.")

    @model_validator(mode="after")
    def _move_needs_a_folder(self) -> Serve:
        if self.after == "move" and not self.move_to:
            raise ValueError("'after: move' needs 'move_to' (the folder gated files are moved to)")
        return self


#: Settings that change where and how a run executes, not what it decides: left out of the idempotency key.
EXECUTION_KEYS = ("runner", "dask", "store", "reports", "alerts", "serve")


class GateConfig(_Strict):
    """The whole gate configuration."""

    version: Literal[1] = 1
    batch: Source = Source()
    trusted: Source = Source()
    columns: Columns = Columns()
    pools: Pools = Pools()
    questions: list[Question] = [Question(name="label")]
    gates: list[Gate] = [Gate(type="normalized_cross_kappa", min_value=0.8),
                         Gate(type="irr_baseline", tolerance=0.1)]
    interval: Interval = Interval()
    validation: Validation = Validation()
    coverage: Coverage = Coverage()
    raters: RaterPolicy = RaterPolicy()
    store: Store = Store()
    reports: Reports = Reports()
    alerts: Alerts = Alerts()
    runner: Literal["local", "dask"] = "local"
    dask: DaskSettings = DaskSettings()
    serve: Serve = Serve()
    sources: dict[str, Source] = Field(
        default={}, description="Named SQL sources a 'labelgate.batch.ready' event may ask for by name, with values "
        "for their :name placeholders (the event never carries SQL or credentials).")

    @model_validator(mode="after")
    def _consistent(self) -> GateConfig:
        names = [q.name for q in self.questions]
        if len(set(names)) != len(names):
            raise ValueError(f"question names must be unique; got {names}")
        if not self.questions:
            raise ValueError("at least one question is needed")
        for gate in self.gates:
            unknown = set(gate.questions or ()) - set(names)
            if unknown:
                raise ValueError(f"gate {gate.type!r} names unknown question(s) {sorted(unknown)}")
        in_database = (["batch"] if self.batch.aggregate else []) + \
            [f"sources.{name}" for name, source in self.sources.items() if source.aggregate]
        richer = [f"{q.name!r} ({'level: set' if q.level == 'set' else f'kind: {q.kind}'})"
                  for q in self.questions if q.kind != "labels" or q.level == "set"]
        if richer and in_database:
            raise ValueError(
                f"question(s) {', '.join(richer)} hold label sets, spans or boxes, which the gate measures on the "
                f"client, and {' and '.join(in_database)} set 'aggregate: true' (statistics computed in the "
                "database, which sees one label per row): set 'aggregate: false' there, and the gate reads the "
                "query's rows and measures them as it measures a file")
        drawn = [q.name for q in self.questions if q.kind != "labels"]
        if drawn and len(self.questions) > 1 and not self.columns.question:
            raise ValueError(f"question(s) {drawn} hold spans or boxes, one row per span or box: with other "
                             "questions in the same table, 'columns.question' must say which rows are whose")
        for name, source in self.sources.items():
            if source.format != "sql":
                raise ValueError(f"sources.{name}: a named source is a SQL query (format: sql, query, url_env)")
        return self

    def with_batch_source(self, request: Any) -> GateConfig:
        """This configuration with its batch read from the named SQL source of ``request``
        (``{"name": NAME, "params": {placeholder: value}}``, as a ``labelgate.batch.ready`` event carries it).

        Raises
        ------
        ConfigError
            The request is not of that form, names no configured source, or gives values for parameters the
            source's query does not have (or misses one it has).
        """
        if not isinstance(request, dict) or not isinstance(request.get("name"), str) or \
                not isinstance(request.get("params", {}), dict) or set(request) - {"name", "params"}:
            raise ConfigError(f"A source request is {{'name': NAME, 'params': {{...}}}}; got {request!r}.",
                              key="source")
        name, params = request["name"], dict(request.get("params") or {})
        if name not in self.sources:
            raise ConfigError(f"The source {name!r} is not configured (configured: {sorted(self.sources)}).",
                              key=f"sources.{name}")
        source = self.sources[name]
        missing = set(source.placeholders()) - set(params) - set(source.params or {})
        unknown = set(params) - set(source.placeholders())
        if missing or unknown:
            problem = f"needs values for {sorted(missing)}" if missing else \
                f"has no placeholder for {sorted(unknown)} (its placeholders: {source.placeholders()})"
            raise ConfigError(f"The source {name!r} {problem}.", key=f"sources.{name}")
        bad = [k for k, v in params.items() if isinstance(v, bool) or not isinstance(v, (str, int, float))]
        if bad:
            raise ConfigError(f"The source {name!r}: the values of {sorted(bad)} must be text or numbers.",
                              key=f"sources.{name}")
        return self.model_copy(update={"batch": source.model_copy(update={"params": {**(source.params or {}),
                                                                                     **params}})})

    def label_column(self, question: Question) -> str:
        """The column holding this question's labels."""
        return question.label_column or self.columns.label

    def gates_for(self, question: Question) -> list[Gate]:
        """Gates that apply to ``question`` (labeler ICC only where the level is numeric)."""
        return [g for g in self.gates if (g.questions is None or question.name in g.questions)]

    def digest(self) -> str:
        """Stable hash of what decides a batch, and the LabelGate version (the idempotency key of a gate run).

        Execution settings (:data:`EXECUTION_KEYS`: runner, store, reports, alerts) are left out, so moving a
        gate to Dask or to another store does not recompute batches already decided. The version is in, so
        that an upgrade that changes a metric recomputes instead of returning a decision of the old code.
        """
        from labelgate._version import __version__

        decisive = self.model_dump(mode="json", exclude=set(EXECUTION_KEYS))
        payload = json.dumps({"config": decisive, "labelgate": __version__}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()
