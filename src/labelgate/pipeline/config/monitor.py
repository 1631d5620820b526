"""The monitor's configuration: the gate configuration plus a ``monitor`` section (pydantic v2, strict).

A monitor configuration is a gate configuration (:class:`labelgate.pipeline.config.GateConfig`: columns, pools,
questions, gates, interval, store, alerts) with one more key, ``monitor``, that says where new annotations
arrive, how the windows are cut, which metrics are followed and how drift is detected. The gate thresholds
(``gates``) are the trusted baseline the windows are judged against. See ``configs/monitor.example.yaml``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictInt, StrictStr, field_validator, model_validator

from labelgate.pipeline.config.loading import config_from_dict, load_config
from labelgate.pipeline.config.models import STRICT, GateConfig, Question, RaterJudging, check_weights_setting
from labelgate.pipeline.limits import MAX_N_BOOT

MetricName = Literal["spa", "irr_crowd", "irr_trusted", "cross_kappa", "normalized_cross_kappa"]
WindowMetric = Literal["spa", "irr_crowd", "cross_kappa", "normalized_cross_kappa"]
MonitorIrr = Literal["krippendorff_alpha", "fleiss_kappa", "gwet_ac"]
ALL_METRICS: tuple[str, ...] = ("spa", "irr_crowd", "irr_trusted", "cross_kappa", "normalized_cross_kappa")
#: Rows a ``sql`` source reads per chunk unless ``monitor.source.chunk_rows`` says otherwise.
DEFAULT_CHUNK_ROWS = 100_000


class _Strict(BaseModel):
    model_config = STRICT


class MonitorSource(_Strict):
    """Where new annotations arrive.

    ``files``: a drop folder; every file matching ``pattern`` (CSV or Parquet, ``**`` recurses) is one
    delivery, merged once (idempotent by file name and content hash). ``parquet``: a Parquet dataset (file or
    folder) read with a filter ``timestamp >= watermark``. ``sql``: a table (``table``) or a query with a
    ``:watermark`` parameter on the database whose URL is in ``url_env``; rows with ``timestamp >= watermark``
    are read, in chunks of at most ``chunk_rows`` rows in timestamp order, each merged and committed on its own. For
    ``parquet`` and ``sql`` the timestamp column (``columns.timestamp``) is required.
    ``label_studio``: a Label Studio project (``project``) on the server whose URL is in ``url_env``, its token in
    ``token_env``; each pass restates the tasks changed since the watermark (updated annotations replace, deleted or
    cancelled ones are removed; see ``docs/monitoring.md``, "Label Studio source"). The control read is ``control``
    for questions without a ``label_column`` (else the ``label_column`` names the control); ``trusted`` is
    ``"ground_truth"`` or the trusted annotators' ids or e-mails; ``reconcile_every`` passes (0: only when asked),
    the project's annotators are compared with the stored judgements to find deletions Label Studio does not list.
    """

    kind: Literal["files", "parquet", "sql", "label_studio"] = "files"
    path: str | None = None
    pattern: str = "*"
    table: str | None = None
    query: str | None = None
    url_env: str | None = None
    default_pool: str | None = Field(
        default=None, description="Pool of rows from tables without a pool column."
    )
    settle_seconds: float = Field(
        default=0.0, ge=0, description="Skip files modified less than this long ago."
    )
    project: int | None = Field(default=None, ge=1, description="Label Studio project id.")
    control: str | None = Field(
        default=None, min_length=1, max_length=200, description="Label Studio control (the results' from_name)."
    )
    trusted: Literal["ground_truth"] | list[StrictStr | StrictInt] = Field(
        default="ground_truth", max_length=10_000,
        description="Label Studio trusted pool: ground-truth annotations, or these annotators (ids or e-mails).",
    )
    token_env: str | None = Field(
        default=None, description="Environment variable holding the Label Studio token (default LABEL_STUDIO_TOKEN)."
    )
    reconcile_every: int = Field(
        default=1, ge=0, le=1_000_000,
        description="Label Studio: look for deleted annotations and tasks every this many passes (0: only when a "
        "pass is asked to, e.g. by an ANNOTATIONS_DELETED webhook).",
    )
    chunk_rows: int = Field(
        default=DEFAULT_CHUNK_ROWS, ge=1, le=10_000_000,
        description="SQL: rows read per chunk past the watermark; each chunk is merged and committed on its own, so a "
        "pass holds one chunk of rows, not the table.",
    )

    @model_validator(mode="after")
    def _complete(self) -> MonitorSource:
        if self.kind != "sql" and "chunk_rows" in self.model_fields_set:
            raise ValueError(f"'chunk_rows' applies to source kind 'sql' only, not {self.kind!r}")
        if self.kind == "label_studio":
            if not self.url_env or self.project is None:
                raise ValueError(
                    "source kind 'label_studio' needs 'url_env' (the environment variable holding the server URL) "
                    "and 'project' (the project id)"
                )
            return self
        if self.kind in ("files", "parquet") and not self.path:
            raise ValueError(f"source kind {self.kind!r} needs 'path'")
        if self.kind == "sql":
            if not self.url_env:
                raise ValueError(
                    "source kind 'sql' needs 'url_env' (the environment variable holding the URL)"
                )
            if bool(self.table) == bool(self.query):
                raise ValueError("source kind 'sql' needs exactly one of 'table' and 'query'")
            if self.query and ":watermark" not in self.query:
                raise ValueError(
                    "a monitor 'query' must filter on the parameter ':watermark', e.g. "
                    "'... where created_at >= :watermark'"
                )
        return self


class Window(_Strict):
    """Window of the monitored series: the last ``hours`` hours or the last ``annotations`` crowd annotations.

    Time windows are aligned on multiples of ``hours`` since 1970-01-01 UTC and close once the watermark
    (latest annotation time seen) passes their end plus ``lateness_hours``; count windows close when they
    hold ``annotations`` crowd annotations (in merge order).
    """

    hours: float | None = Field(default=None, gt=0)
    annotations: int | None = Field(default=None, ge=2)
    lateness_hours: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _one(self) -> Window:
        if self.hours is not None and self.annotations is not None:
            raise ValueError("set one of 'hours' and 'annotations', not both")
        return self

    @property
    def kind(self) -> str:
        """``"annotations"`` when ``annotations`` is set, else ``"hours"`` (default 6 hours)."""
        return "annotations" if self.annotations is not None else "hours"

    @property
    def length_hours(self) -> float:
        """Length of a time window (6 when neither key is set)."""
        return 6.0 if self.hours is None else float(self.hours)


class ChangeDetector(_Strict):
    """Self-starting one-sided lower CUSUM on the standardised window values (see ``docs/monitoring.md``)."""

    metrics: list[WindowMetric] = ["irr_crowd", "cross_kappa"]
    reference_windows: int = Field(default=10, ge=3)
    k: float = Field(default=0.5, gt=0)
    h: float = Field(default=6.0, gt=0, description="Alarm limit; derived from 'arl0' when that is set.")
    arl0: float | None = Field(
        default=None, gt=1, le=1e9,
        description="In-control average run length of the whole monitor, in windows (e.g. 720 for one false "
        "alarm a month with hourly windows), split evenly over the series it watches (change detector and baseline "
        "gates); 'h' and the baseline rule's persistence are derived from it (labelgate.monitor.arl).",
    )
    close_bound: float = Field(
        default=1.0, ge=0, description="An episode closes only after its last 'close_after' windows had z >= "
        "-close_bound (and the return CUSUM passed h).",
    )


class Drift(_Strict):
    """Drift detection on the windowed series."""

    baseline: bool = True
    baseline_rule: Literal["ci_high", "value"] = "ci_high"
    baseline_close: Literal["clear", "no_breach"] = Field(
        default="clear",
        description="'clear': an episode closes when windows are clearly back (interval entirely at or above the "
        "threshold), so a level sitting at the threshold is one lasting incident, not a stream of open/close "
        "alerts; 'no_breach': when windows merely stop breaching.",
    )
    baseline_metrics: list[WindowMetric] | None = None
    change: ChangeDetector = ChangeDetector()
    open_after: int = Field(
        default=1, ge=1, description="Consecutive breaching windows before a baseline episode opens; with "
        "'change.arl0', the least of the persistence derived from the target.",
    )
    close_after: int = Field(default=3, ge=1)
    cooldown: int = Field(
        default=5, ge=0,
        description="Windows after the close condition during which a renewed breach or alarm continues the same "
        "episode (one incident, one open and one close alert) instead of closing it and opening another.",
    )
    min_items: int = Field(
        default=10, ge=1, description="Windows with fewer items (of the metric) are not judged."
    )


class RaterChecks(RaterJudging):
    """Per-rater flags (see :func:`labelgate.metrics.diagnostics.rater_diagnostics`; judging: :class:`RaterJudging`)."""

    collusion_margin: float = Field(default=0.3, ge=0, le=1)
    min_pair_items: int = Field(default=20, ge=1)
    worst: int = Field(default=5, ge=0, description="Worst raters named in an episode alert.")


class MonitorSettings(_Strict):
    """The ``monitor`` section."""

    name: str = Field(default="default", min_length=1, max_length=100)
    source: MonitorSource = MonitorSource(path="incoming")
    window: Window = Window()
    metrics: list[MetricName] = ["spa", "irr_crowd", "irr_trusted", "cross_kappa", "normalized_cross_kappa"]
    irr: MonitorIrr = "krippendorff_alpha"
    weights: StrictStr | list[list[float]] | None = Field(
        default=None, description="The IRR's agreement weighting, as a gate's 'weights': a handbook name "
        "(identity, linear, quadratic, ordinal, radical, ratio, circular, bipolar) or a q x q matrix in the question's "
        "category order; the crowd and trusted IRR and normalized kappa_x (whose kappa_x then uses the distance "
        "1 - w) take it. A weighting other than identity needs every question's 'categories' listed.",
    )
    spa_weighting: Literal["flat", "annotations", "annotations_m1", "edges", "inv_var", "inv_var_class"] = (
        "annotations_m1"
    )
    n_boot: int = Field(default=500, ge=2, le=MAX_N_BOOT, description="Bootstrap resamples of the window intervals.")
    drift: Drift = Drift()
    raters: RaterChecks = RaterChecks()
    alert_on: list[Literal["open", "close"]] = ["open", "close"]

    @field_validator("weights")
    @classmethod
    def _known_weights(cls, value: str | list[list[float]] | None) -> Any:
        return value if value is None else check_weights_setting(value)


class MonitorConfig(GateConfig):
    """A gate configuration with a ``monitor`` section."""

    monitor: MonitorSettings = MonitorSettings()

    @model_validator(mode="after")
    def _monitorable(self) -> MonitorConfig:
        for index, question in enumerate(self.questions):
            self._weighable(index, question)
            if question.level == "ordinal" and not question.categories:
                raise ValueError(
                    f"questions[{index}] ({question.name!r}) is ordinal: the monitor needs its "
                    "categories listed in order ('categories'), since new labels cannot be "
                    "placed in an order"
                )
        if self.monitor.source.kind in ("parquet", "sql") and not self.columns.timestamp:
            raise ValueError(
                f"monitor.source.kind {self.monitor.source.kind!r} needs 'columns.timestamp' "
                "(the watermark column)"
            )
        return self

    def _weighable(self, index: int, question: Question) -> None:
        """Refuse ``monitor.weights`` a question cannot take.

        A weighting other than identity gives a pair of categories a credit that depends on every category (their
        range, their ranks), and a stream's maintained sums hold the credits of its items' pairs: the categories must
        be fixed (listed) for those sums to stay right as labels arrive. Label sets are credited by their distance,
        spans and boxes are nominal units: neither has positions to weight.
        """
        weights = self.monitor.weights
        if weights is None or weights in ("identity", "nominal"):
            return
        where = f"questions[{index}] ({question.name!r})"
        if question.level == "set" or question.kind != "labels":
            what = "'level: set' (its credit is 1 - the set distance)" if question.level == "set" else \
                f"'kind: {question.kind}' (nominal units)"
            raise ValueError(f"monitor.weights {_shown(weights)} does not apply to {where}, which is {what}; "
                             "leave monitor.weights out or set it to 'identity'")
        if not question.categories:
            raise ValueError(f"monitor.weights {_shown(weights)} needs {where} to list its 'categories': a weighting "
                             "credits a pair of categories by where they lie among all of them, so the monitor's "
                             "running sums need the categories fixed, not growing with the labels")
        if not isinstance(weights, str) and len(weights) != len(question.categories):
            raise ValueError(f"monitor.weights is a {len(weights)} x {len(weights)} matrix; {where} has "
                             f"{len(question.categories)} categories (one row and column per category, in their "
                             "order)")
        if not isinstance(weights, str):
            from labelgate.errors import ParameterError
            from labelgate.metrics.weights import check_weight_matrix

            try:
                check_weight_matrix(weights, tuple(question.categories), "monitor.weights")
            except ParameterError as exc:
                raise ValueError(f"{where}: {exc}") from None

    def threshold_gate(self, question: Question, gate_type: str) -> Any:
        """The first gate of ``gate_type`` that applies to ``question`` (None if there is none)."""
        return next((g for g in self.gates_for(question) if g.type == gate_type), None)


def _shown(weights: str | list[list[float]]) -> str:
    return repr(weights) if isinstance(weights, str) else "(a matrix)"


def load_monitor_config(path: str | Path) -> MonitorConfig:
    """Load and validate a YAML monitor configuration (errors name the file and the key path).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "monitor.yaml"
    >>> _ = p.write_text("monitor:\\n  source: {path: drop}\\n  window: {annotations: 500}\\n")
    >>> cfg = load_monitor_config(p)
    >>> cfg.monitor.window.kind, cfg.monitor.window.annotations
    ('annotations', 500)
    """
    return load_config(path, MonitorConfig)


def monitor_config_from_dict(data: Any, source: str = "<dict>") -> MonitorConfig:
    """Validate a monitor configuration given as a mapping (``source`` names it in errors)."""
    return config_from_dict(data, source, MonitorConfig)


def as_monitor_config(config: Any) -> MonitorConfig:
    """A :class:`MonitorConfig` from a path, a mapping or a config object."""
    if isinstance(config, MonitorConfig):
        return config
    if isinstance(config, dict):
        return monitor_config_from_dict(config)
    if isinstance(config, GateConfig):
        return monitor_config_from_dict(config.model_dump())
    return load_monitor_config(config)
