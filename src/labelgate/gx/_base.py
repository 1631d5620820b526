"""Shared base class of LabelGate's GX expectations: parameters, judging rule, renderers.

Every LabelGate expectation is a GX ``BatchExpectation`` over one long-format
batch that holds both pools (column names configurable). Subclasses declare
their metric, their threshold parameters and how the thresholds turn into
*checks*; this module holds the rest:

* the common parameters (columns, pools, level, categories, question filter,
  ``ci``/``use_ci_bound``/``n_boot``/``seed``) and their validation, which
  raises pydantic (GX-style) errors naming the parameter;
* the **judging rule** (:mod:`labelgate.gx._judging`, re-exported here):
  each check compares one statistic with one threshold; with
  ``use_ci_bound`` it is judged on the conservative end of the interval
  (the lower end for "at least", the upper end for "at most"), otherwise on
  the point value; both verdicts are reported so that a decision policy can
  tell REJECT (fails on both) from REVIEW (the interval straddles);
* the Data Docs renderers: a prescriptive sentence ("normalized κx (crowd vs
  trusted) must be at least 0.80"), the observed value with its interval, and
  a statement appended after the sentence on the validation page
  ("— observed 0.86 (95% CI 0.81–0.90)").

No statistics are computed here: values come from the metric providers
(:mod:`labelgate.gx._metrics`), which call the core.
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, List, Literal, Optional, Tuple, Union  # noqa: UP035 (pydantic v1)

from great_expectations.compatibility import pydantic
from great_expectations.compatibility.pydantic import StrictInt, StrictStr
from great_expectations.core.suite_parameters import SuiteParameterDict
from great_expectations.exceptions import InvalidExpectationConfigurationError
from great_expectations.expectations.expectation import BatchExpectation
from great_expectations.expectations.model_field_types import ConditionParser
from great_expectations.expectations.row_conditions import RowConditionType
from great_expectations.render import (
    LegacyDiagnosticRendererType,
    LegacyRendererType,
    RenderedStringTemplateContent,
)
from great_expectations.render.renderer.renderer import renderer
from great_expectations.render.renderer_configuration import RendererConfiguration, RendererValueType

from labelgate.core.estimate import DEFAULT_N_BOOT
from labelgate.errors import DesignError, ParameterError, Reason, check_option
from labelgate.gx._judging import (
    Check,
    _finite,
    digits_for,
    fmt_kw,
    fmt_number,
    fmt_threshold,
    judge,
    raised_exception,
    with_ci,
)

#: A threshold: a number, a GX suite parameter (``{"$PARAMETER": "min_kappa"}``) or None.
Threshold = Union[float, SuiteParameterDict, None]  # noqa: UP007 (pydantic v1 needs typing.Union)
PoolValue = Union[StrictStr, StrictInt]  # noqa: UP007

#: Display names of the IRR metrics.
IRR_LABELS = {"krippendorff_alpha": "Krippendorff's α", "fleiss_kappa": "Fleiss' κ", "conger_kappa": "Conger's κ",
              "gwet_ac": "Gwet's AC", "janson_olsson_iota": "Janson–Olsson ι"}


#: The ``weights`` parameter of the IRR expectations: a weighting of the handbook by name, or a q x q matrix of
#: credits on the categories (rows and columns in ``categories`` order), checked against them when computed.
IrrWeights = Union[StrictStr, List[List[float]], None]  # noqa: UP006, UP007


def check_irr_weights(v: Any, expectation: str) -> Any:
    """A ``weights`` parameter: None, a handbook weighting's name or a square list of rows (raises naming it)."""
    from labelgate.metrics.weights import ALIASES, WEIGHTS

    if v is None:
        return v
    if isinstance(v, str):
        if v not in WEIGHTS and v not in ALIASES:
            options = ", ".join(repr(w) for w in (*WEIGHTS, *ALIASES))
            raise ParameterError(f"The 'weights' parameter of {expectation} must be one of {options}, or a q x q "
                                 f"matrix (a list of q rows); got {v!r}.", parameter="weights", value=v)
        return v
    if not v or any(len(row) != len(v) for row in v):
        raise ParameterError(f"The 'weights' parameter of {expectation} must be a square matrix (q rows of q "
                             f"credits, in the order of 'categories'); got rows of lengths "
                             f"{[len(row) for row in v][:10]}.", parameter="weights", value=v)
    return v


def weights_phrase(kw: dict[str, Any]) -> str:
    """``" with linear weights"`` (empty without ``weights``) for a prescriptive sentence."""
    weights = kw.get("weights")
    if weights is None:
        return ""
    return f" with {weights} weights" if isinstance(weights, str) else " with custom weights"


# ------------------------------------------------------------------ base class
class LabelGateExpectation(BatchExpectation):
    """Base class: the parameters shared by every LabelGate expectation.

    Parameters
    ----------
    item_column, rater_column, label_column : str
        Columns of the long batch (defaults ``item_id``, ``rater_id``, ``label``).
    pool_column : str or None, default "pool"
        Column naming the pool of each judgement. None: the whole batch is
        the crowd pool (only for single-pool expectations).
    question_column : str, default "question"
        Column of the question id, used with ``question``.
    question : str or int, optional
        Keep only the rows of this question.
    crowd_pool, trusted_pool : str or int, default "crowd" / "trusted"
        Values of ``pool_column`` naming the two pools. A value absent from
        the batch is an error naming the parameter.
    level : {"nominal", "ordinal", "interval", "ratio", "set"}, default "nominal"
        Measurement level of the labels; ``"set"``: each label is a set of
        categories (a list, tuple or set), compared by ``distance``.
    distance : {"jaccard", "masi"}, optional
        Level ``"set"`` only: the distance between two label sets.
    categories : list, optional
        Ordered category list (required in practice for ordinal labels that
        do not sort naturally).
    duplicates : {"error", "first", "last"}, default "error"
        A rater judging one item twice in one pool.
    ci : float or None, default 0.95
        Level of the item-bootstrap interval; None for no interval.
    use_ci_bound : bool, default False
        Judge on the conservative end of the interval instead of the point.
    n_boot : int, default 2000
        Bootstrap resamples.
    seed : int or None, default 0
        Bootstrap seed (fixed by default so a gate is reproducible).
    """

    item_column: str = pydantic.Field("item_id", description="Item id column.")
    rater_column: str = pydantic.Field("rater_id", description="Rater id column.")
    label_column: str = pydantic.Field("label", description="Label column.")
    pool_column: Optional[str] = pydantic.Field("pool", description="Pool / replication column.")  # noqa: UP045
    question_column: str = pydantic.Field("question", description="Question id column.")
    question: Optional[PoolValue] = pydantic.Field(None, description="Keep only this question.")  # noqa: UP045
    crowd_pool: PoolValue = pydantic.Field("crowd", description="Pool value of the crowd (batch).")
    trusted_pool: Optional[PoolValue] = pydantic.Field("trusted", description="Pool value of the trusted pool.")  # noqa: UP045
    level: Literal["nominal", "ordinal", "interval", "ratio", "set"] = "nominal"
    distance: Optional[Literal["jaccard", "masi"]] = pydantic.Field(  # noqa: UP045
        None, description="level 'set': the distance between two label sets (default jaccard).")
    categories: Optional[List[Any]] = None  # noqa: UP006, UP045
    duplicates: Literal["error", "first", "last"] = "error"
    ci: Optional[float] = pydantic.Field(0.95, description="Confidence level of the interval.")  # noqa: UP045
    use_ci_bound: bool = pydantic.Field(False, description="Judge on the conservative interval end.")
    ci_method: Literal["auto", "bca", "delta", "percentile"] = pydantic.Field(
        "auto", description="Interval method ('auto': the metric's, docs/metrics.md).")
    n_boot: int = pydantic.Field(DEFAULT_N_BOOT, description="Bootstrap resamples.")
    seed: Optional[int] = pydantic.Field(0, description="Bootstrap seed.")  # noqa: UP045
    row_condition: RowConditionType = None
    condition_parser: Union[ConditionParser, None] = None  # noqa: UP007

    domain_keys: ClassVar[Tuple[str, ...]] = ("batch_id", "row_condition", "condition_parser")  # noqa: UP006
    common_success_keys: ClassVar[Tuple[str, ...]] = (  # noqa: UP006
        "item_column", "rater_column", "label_column", "pool_column", "question_column", "question",
        "crowd_pool", "trusted_pool", "level", "distance", "categories", "duplicates", "ci", "ci_method",
        "use_ci_bound", "n_boot", "seed",
    )
    #: Threshold parameters of the subclass, in display order.
    threshold_keys: ClassVar[Tuple[str, ...]] = ()  # noqa: UP006
    #: At least one of these thresholds must be given.
    required_thresholds: ClassVar[Tuple[str, ...]] = ()  # noqa: UP006
    #: Whether the expectation compares the crowd with the trusted pool.
    needs_trusted: ClassVar[bool] = True
    library_metadata: ClassVar[Dict[str, Any]] = {  # noqa: UP006
        "maturity": "experimental",
        "tags": ["labelgate", "agreement", "annotation"],
        "contributors": ["@labelgate"],
        "requirements": [],
    }

    @classmethod
    def _type_name(cls) -> str:
        """The class name (validators call it: mypy types their ``cls`` as an instance)."""
        return cls.__name__

    @classmethod
    def is_abstract(cls) -> bool:
        """The base class (no metric) is abstract, so GX does not register it as an expectation type."""
        return not cls.metric_dependencies or super().is_abstract()

    # ------------------------------------------------------------ validation
    @pydantic.validator("ci")
    def _check_ci(cls, v: Optional[float]) -> Optional[float]:  # noqa: N805, UP045
        if v is not None and not 0 < v < 1:
            raise ParameterError(f"The 'ci' parameter must be None or a confidence level in (0, 1), e.g. 0.95; "
                                 f"got {v!r}.", parameter="ci", value=v)
        return v

    @pydantic.validator("n_boot")
    def _check_n_boot(cls, v: int) -> int:  # noqa: N805
        if v < 2:
            raise ParameterError(f"The 'n_boot' parameter must be an integer >= 2; got {v!r}.",
                                 parameter="n_boot", value=v)
        return v

    @pydantic.validator("min_value", "max_value", "tolerance", "min_ratio", "max_excess", "margin",
                        check_fields=False)
    def _check_threshold(cls, v: Any, field: Any) -> Any:  # noqa: N805
        if isinstance(v, dict) and "$PARAMETER" not in v:
            raise ParameterError(f"The {field.name!r} parameter must be a number or a suite parameter "
                                 f"{{'$PARAMETER': name}}; got {v!r}.", parameter=field.name, value=v)
        return v

    @pydantic.validator("irr", check_fields=False)
    def _check_irr(cls, v: str) -> str:  # noqa: N805
        from labelgate.gx._metrics import IRR_METRICS

        check_option(v, IRR_METRICS, "irr", cls._type_name())
        return v

    @pydantic.validator("weights", check_fields=False)
    def _check_weights(cls, v: Any) -> Any:  # noqa: N805
        return check_irr_weights(v, cls._type_name())

    @pydantic.root_validator(skip_on_failure=True)
    def _check_iota_weights(cls, values: dict[str, Any]) -> dict[str, Any]:  # noqa: N805
        if values.get("weights") is not None and values.get("irr") == "janson_olsson_iota":
            raise ParameterError(f"The 'weights' parameter of {cls._type_name()} cannot be used with "
                                 "irr='janson_olsson_iota' (ι has a distance from the level, not weights); use "
                                 "'krippendorff_alpha', 'fleiss_kappa', 'conger_kappa' or 'gwet_ac'.",
                                 parameter="weights", value=values.get("weights"))
        return values

    @pydantic.root_validator(skip_on_failure=True)
    def _check_required(cls, values: dict[str, Any]) -> dict[str, Any]:  # noqa: N805
        if cls.required_thresholds:
            cls._require(values, *cls.required_thresholds)
        return values

    @pydantic.root_validator(skip_on_failure=True)
    def _check_common(cls, values: dict[str, Any]) -> dict[str, Any]:  # noqa: N805
        if values.get("use_ci_bound") and values.get("ci") is None:
            raise ParameterError("The 'use_ci_bound' parameter is True but 'ci' is None: set a confidence level "
                                 "(e.g. ci=0.95) to judge on the interval.", parameter="use_ci_bound")
        if cls.needs_trusted:
            if values.get("pool_column") is None:
                raise ParameterError(f"The 'pool_column' parameter of {cls._type_name()} must name the pool column; "
                                     "it compares the crowd pool with the trusted pool.", parameter="pool_column")
            if values.get("trusted_pool") is None:
                raise ParameterError(f"The 'trusted_pool' parameter of {cls._type_name()} must name a pool.",
                                     parameter="trusted_pool")
            if str(values.get("crowd_pool")) == str(values.get("trusted_pool")):
                raise ParameterError(f"The 'crowd_pool' and 'trusted_pool' parameters must differ; both are "
                                     f"{values.get('crowd_pool')!r}.", parameter="trusted_pool")
        return values

    @classmethod
    def _require(cls, values: dict[str, Any], *names: str) -> None:
        """At least one of ``names`` must be set (used by subclasses' root validators)."""
        if all(values.get(n) is None for n in names):
            which = " or ".join(repr(n) for n in names)
            raise ParameterError(f"{cls.__name__} needs the {which} parameter.", parameter=names[0])

    @classmethod
    def _check_order(cls, values: dict[str, Any], low: str, high: str) -> None:
        lo, hi = values.get(low), values.get(high)
        if _finite(lo) and _finite(hi) and lo > hi:
            raise ParameterError(f"The {low!r} parameter ({lo}) must be less than or equal to {high!r} ({hi}).",
                                 parameter=low, value=lo)

    # ------------------------------------------------------------ judging
    def _checks(self, m: dict[str, Any]) -> list[Check]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _resolved(self, name: str) -> Any:
        """A threshold after GX substituted suite parameters; an unresolved one is a configuration error."""
        value = getattr(self, name)
        if isinstance(value, dict):
            raise InvalidExpectationConfigurationError(
                f"The {name!r} parameter of {type(self).__name__} is the suite parameter "
                f"{value.get('$PARAMETER')!r}, which was not given a value at validation time.")
        return value

    def _validate(self, metrics: dict, runtime_configuration: Optional[dict] = None,  # noqa: UP045
                  execution_engine: Any = None) -> dict[str, Any]:
        m = metrics[self.metric_dependencies[0]]
        if self.use_ci_bound and m.get("interval_unavailable"):  # a bound that cannot be judged is a fault
            raise DesignError(f"use_ci_bound=True, but {m['interval_unavailable']}.", Reason.INCOMPATIBLE_RATINGS)
        verdict = judge(self._checks(m), m, self.use_ci_bound)
        return {"success": verdict["success"],
                "result": {"observed_value": m.get("value"), "details": self._details(m, verdict)}}

    def _details(self, m: dict[str, Any], verdict: dict[str, Any]) -> dict[str, Any]:
        own = {"metric", "value", "ci_low", "ci_high", "ci_level", "n_boot", "n_items", "n_ratings",
               "n_items_excluded", "reason", "reason_code", "coverage", "sql"}
        reason = m.get("reason") or self._reason(m, verdict)
        return {
            "metric": m.get("metric"), "value": m.get("value"), "ci_low": m.get("ci_low"),
            "ci_high": m.get("ci_high"), "ci_level": m.get("ci_level"), "n_boot": m.get("n_boot"),
            "judged_on": "ci_bound" if self.use_ci_bound else "point",
            "thresholds": {k: getattr(self, k) for k in self.threshold_keys if getattr(self, k) is not None},
            "passes_on_point": verdict["passes_on_point"], "passes_on_bound": verdict["passes_on_bound"],
            "interval_verdict": verdict["interval_verdict"], "checks": verdict["checks"],
            "components": {k: v for k, v in m.items() if k not in own},
            "n_items": m.get("n_items"), "n_ratings": m.get("n_ratings"),
            "n_items_excluded": m.get("n_items_excluded"), "coverage": m.get("coverage"),
            "reason": reason, "reason_code": m.get("reason_code"),
            "crowd_pool": self.crowd_pool, "trusted_pool": self.trusted_pool if self.needs_trusted else None,
            "question": self.question,
            # on a SQL batch: queries run, rows fetched and batch rows aggregated in the database (None on pandas)
            "sql": m.get("sql"),
        }

    def _reason(self, m: dict[str, Any], verdict: dict[str, Any]) -> Optional[str]:  # noqa: UP045
        """Why a checked statistic is undefined, or why the bound could not be used."""
        for c in verdict["checks"]:
            if not _finite(c["point"]):
                extra = [v for k, v in m.items() if k.endswith("_reason") and v]
                return f"{c['statistic']} is undefined" + (f": {extra[0]}" if extra else "")
        if self.use_ci_bound and verdict["passes_on_bound"] is None:
            return "no bootstrap interval could be computed (all resamples undefined), so the bound cannot be judged"
        return None

    # ------------------------------------------------------------ rendering
    @classmethod
    def _kwargs(cls, configuration: Any) -> dict[str, Any]:
        """Configuration kwargs completed with the class defaults."""
        given = dict(getattr(configuration, "kwargs", None) or {})
        return {name: given.get(name, f.default) for name, f in cls.__fields__.items()} | given

    @classmethod
    def _sentence(cls, kw: dict[str, Any]) -> str:  # pragma: no cover - abstract
        """Prescriptive sentence, thresholds already formatted."""
        raise NotImplementedError

    @classmethod
    def _observed(cls, details: dict[str, Any], observed: Any) -> str:
        """Observed-value cell: the value with its interval."""
        digits = digits_for([observed, details.get("ci_low"), details.get("ci_high")],
                            list((details.get("thresholds") or {}).values()))
        return with_ci(observed, details.get("ci_low"), details.get("ci_high"), details.get("ci_level"), digits)

    @classmethod
    def _pools(cls, kw: dict[str, Any]) -> str:
        return f"{kw.get('crowd_pool')} vs {kw.get('trusted_pool')}"

    @classmethod
    def _full_sentence(cls, kw: dict[str, Any]) -> str:
        sentence = cls._sentence(kw)
        if kw.get("use_ci_bound"):
            sentence += f", judged on the {float(kw.get('ci') or 0.95):.0%} CI bound"
        if kw.get("question") is not None:
            sentence += f" (question {kw['question']})"
        return sentence + "."

    @classmethod
    @renderer(renderer_type=LegacyRendererType.PRESCRIPTIVE)
    def _prescriptive_renderer(cls, configuration: Any = None, result: Any = None,
                               runtime_configuration: Optional[dict] = None,  # noqa: UP045
                               **kwargs: Any) -> list[RenderedStringTemplateContent]:
        if configuration is None and result is not None:
            configuration = result.expectation_config
        runtime_configuration = runtime_configuration or {}
        return [RenderedStringTemplateContent(content_block_type="string_template", string_template={
            "template": "$sentence", "params": {"sentence": cls._full_sentence(cls._kwargs(configuration))},
            "styling": runtime_configuration.get("styling")})]

    @classmethod
    def _prescriptive_template(cls, renderer_configuration: RendererConfiguration) -> RendererConfiguration:
        # Atomic renderer (GX Cloud, ``expectation.render()``): the same sentence as one string parameter.
        kw = cls._kwargs(renderer_configuration.configuration)
        renderer_configuration.add_param(name="sentence", param_type=RendererValueType.STRING,
                                         value=cls._full_sentence(kw))
        renderer_configuration.template_str = "$sentence"
        return renderer_configuration

    @classmethod
    @renderer(renderer_type=LegacyDiagnosticRendererType.OBSERVED_VALUE)
    def _diagnostic_observed_value_renderer(cls, configuration: Any = None, result: Any = None,
                                            runtime_configuration: Optional[dict] = None,  # noqa: UP045
                                            **kwargs: Any) -> str:
        r = (result.result if result is not None else None) or {}
        if "details" not in r:
            return "--"
        details = r["details"]
        if not _finite(r.get("observed_value")):
            return f"NaN ({details.get('reason') or 'undefined'})"
        return cls._observed(details, r.get("observed_value"))

    @classmethod
    @renderer(renderer_type=LegacyDiagnosticRendererType.UNEXPECTED_STATEMENT)
    def _diagnostic_unexpected_statement_renderer(cls, configuration: Any = None, result: Any = None,
                                                  runtime_configuration: Optional[dict] = None,  # noqa: UP045
                                                  **kwargs: Any) -> list[Any]:
        if result is None:
            return []
        if (result.exception_info or {}).get("raised_exception") or not (result.result or {}).get("details"):
            return super()._diagnostic_unexpected_statement_renderer(
                configuration=configuration, result=result, runtime_configuration=runtime_configuration)
        return [RenderedStringTemplateContent(content_block_type="string_template", string_template={
            "template": "$statement", "params": {"statement": cls.statement(result.result)},
            "styling": {"params": {"statement": {"classes": ["text-muted"]}}}})]

    @classmethod
    def statement(cls, result: dict[str, Any]) -> str:
        """``"— observed 0.86 (95% CI 0.81–0.90); 1700 items, coverage 100%."``."""
        details = result.get("details") or {}
        observed = result.get("observed_value")
        if not _finite(observed) or details.get("reason"):
            head = f"— observed {cls._observed(details, observed)}" if _finite(observed) else "— observed NaN"
            return f"{head}: {details.get('reason') or 'undefined'}."
        text = f"— observed {cls._observed(details, observed)}"
        if details.get("judged_on") == "ci_bound":
            text += f"; judged on the CI bound ({details.get('interval_verdict')})"
        cov = details.get("coverage") or {}
        text += f"; {details.get('n_items')} items"
        if _finite(cov.get("coverage")):
            share = cov["coverage"]
            share_text = f"{share:.0%}" if share in (0, 1) else f"{share:.1%}"  # 99.9% must not print as 100%
            text += f", coverage {share_text} of {cov.get('n_crowd_items')} crowd items"
        return text + "."


__all__ = [
    "Check",
    "IrrWeights",
    "LabelGateExpectation",
    "Threshold",
    "fmt_kw",
    "fmt_number",
    "fmt_threshold",
    "judge",
    "raised_exception",
    "with_ci",
]
