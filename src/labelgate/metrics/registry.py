"""The list of every metric, with the properties the shared tests check.

``tests/metrics/test_common.py`` runs the degenerate-input policy, relabelling
invariance, perfect agreement, determinism of intervals and the Estimate
contract over :data:`METRICS`; a metric added to the package without an entry
here fails ``test_every_public_metric_is_registered``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from labelgate.core.estimate import INTERVAL_METHODS
from labelgate.metrics.agreement import (
    bennett_s,
    cohen_kappa,
    conger_kappa,
    fleiss_kappa,
    gwet_ac,
    percent_agreement,
    scott_pi,
    specific_agreement,
)
from labelgate.metrics.alpha import janson_olsson_iota, krippendorff_alpha
from labelgate.metrics.bangdiwala import bangdiwala_b
from labelgate.metrics.cross import cross_kappa, normalized_cross_kappa
from labelgate.metrics.icc import icc
from labelgate.metrics.phi import phi_agreement
from labelgate.metrics.spa import spa
from labelgate.metrics.variance import item_icc, labeler_icc
from labelgate.metrics.weights import WEIGHTS
from labelgate.metrics.xcc import cross_correlation, disattenuated_correlation

Kind = Literal["single", "cross", "per_category"]
Family = Literal["agreement", "numeric"]

#: Public functions of ``labelgate.metrics`` that are not metrics of `Ratings` (each tested in its own file):
#: the variance-components object, and the planning helpers that take reliabilities, not ratings.
NOT_METRICS: dict[str, str] = {
    "variance_components": "returns the item/rater/residual components (tests/metrics/test_variance.py)",
    "spearman_brown": "a function of a reliability, not of ratings (tests/metrics/test_variance.py)",
    "raters_needed": "the inverse of spearman_brown (tests/metrics/test_variance.py)",
    "plan_items": "a design planner (tests/metrics/test_variance.py)",
    "ItemPlan": "the result type of plan_items",
    "VarianceComponents": "the result type of variance_components",
    "span_f1": "scores two span tables, not Ratings (tests/metrics/test_spans.py)",
    "matched_iou": "scores a box table, not Ratings (tests/metrics/test_boxes.py)",
    "weights": "the module of the weightings every weighted coefficient takes (tests/metrics/test_weights.py)",
}


@dataclass(frozen=True)
class MetricSpec:
    """What the shared tests need to know about a metric.

    Attributes
    ----------
    name : str
        Public name (``labelgate.<name>``).
    func : callable
        The metric.
    kind : {"single", "cross", "per_category"}
        One replication, two replications, or a dict of per-category Estimates.
    chance_corrected : bool
        Whether the value is chance-corrected (then 0/0 with one category → NaN).
    levels : tuple of str
        Levels the metric accepts with its default options.
    two_raters_only : bool
        Needs exactly two raters (Cohen).
    options : tuple of dict
        Keyword variants exercised by the shared tests (e.g. each weighting).
    family : {"agreement", "numeric"}
        Agreement coefficients on categories, or model-based metrics of numeric labels (variance
        components, correlations, Phi); each family has its own shared checks.
    perfect : float
        Value under perfect agreement (0 for the labeler ICC).
    bootstrap : bool
        Takes ``n_boot`` and ``seed`` (Phi's interval is a likelihood interval).
    order_invariant : bool
        Exactly invariant to the order of rows and to id relabelling (not the random split halves).
    affine_invariant : bool
        Invariant to ``x -> a x + b`` of numeric labels (not Phi, which is defined on a bounded scale).
    complete_only : bool
        Needs a complete items x raters design (ICC forms of McGraw & Wong).
    ci_methods : tuple of str
        Values of its ``ci_method`` option (the item-bootstrap interval methods); empty when the metric
        has no such option (its interval is its own).
    """

    name: str
    func: Callable[..., Any]
    kind: Kind = "single"
    chance_corrected: bool = True
    levels: tuple[str, ...] = ("nominal", "ordinal", "interval", "ratio")
    two_raters_only: bool = False
    options: tuple[dict[str, Any], ...] = ({},)
    family: Family = "agreement"
    perfect: float = 1.0
    bootstrap: bool = True
    order_invariant: bool = True
    affine_invariant: bool = True
    complete_only: bool = False
    ci_methods: tuple[str, ...] = INTERVAL_METHODS


# Every weighting of Gwet's handbook (labelgate.metrics.weights); a custom matrix depends on the number of
# categories, so it is tested in tests/metrics/test_weights.py.
_WEIGHTS: tuple[dict[str, Any], ...] = tuple({"weights": w} for w in WEIGHTS)
# The handbook's marginals (the default) and the variant over pairable items only, each with every weighting.
_MARGINALS_WEIGHTS: tuple[dict[str, Any], ...] = (*_WEIGHTS, *({**w, "marginals": "pairable_items"} for w in _WEIGHTS))
_SPA = tuple({"weighting": w} for w in ("flat", "annotations", "annotations_m1", "edges", "inv_var",
                                          "inv_var_class"))

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("percent_agreement", percent_agreement, chance_corrected=False, options=_WEIGHTS),
    MetricSpec("specific_agreement", specific_agreement, kind="per_category", chance_corrected=False),
    MetricSpec("bennett_s", bennett_s, options=_WEIGHTS),
    MetricSpec("cohen_kappa", cohen_kappa, two_raters_only=True, options=_WEIGHTS),
    MetricSpec("bangdiwala_b", bangdiwala_b, chance_corrected=False, two_raters_only=True),
    MetricSpec("conger_kappa", conger_kappa, options=_MARGINALS_WEIGHTS),
    MetricSpec("scott_pi", scott_pi, options=_MARGINALS_WEIGHTS),
    MetricSpec("fleiss_kappa", fleiss_kappa, options=_MARGINALS_WEIGHTS),
    MetricSpec("gwet_ac", gwet_ac, options=_MARGINALS_WEIGHTS),
    MetricSpec("krippendorff_alpha", krippendorff_alpha, options=({}, *_WEIGHTS)),
    MetricSpec("janson_olsson_iota", janson_olsson_iota, levels=("nominal", "interval", "ratio")),
    MetricSpec("spa", spa, chance_corrected=False, options=_SPA),
    MetricSpec("cross_kappa", cross_kappa, kind="cross"),
    MetricSpec("normalized_cross_kappa", normalized_cross_kappa, kind="cross",
               options=({"irr": "krippendorff_alpha"}, {"irr": "fleiss_kappa"}, {"irr": "conger_kappa"},
                        {"irr": "gwet_ac"})),
    MetricSpec("icc", icc, family="numeric", levels=("interval", "ratio"), complete_only=True, ci_methods=(),
               options=tuple({"form": f} for f in ("1", "A1", "C1", "1k", "Ak", "Ck"))),
    MetricSpec("item_icc", item_icc, family="numeric", levels=("interval", "ratio"), ci_methods=()),
    MetricSpec("labeler_icc", labeler_icc, family="numeric", levels=("interval", "ratio"), perfect=0.0,
               ci_methods=()),
    MetricSpec("cross_correlation", cross_correlation, kind="cross", family="numeric",
               levels=("interval", "ratio"), ci_methods=()),
    MetricSpec("disattenuated_correlation", disattenuated_correlation, kind="cross", family="numeric",
               levels=("interval", "ratio"), order_invariant=False, ci_methods=()),
    MetricSpec("phi_agreement", phi_agreement, family="numeric", levels=("interval", "ordinal"), bootstrap=False,
               affine_invariant=False, ci_methods=()),
)

METRICS_BY_NAME: dict[str, MetricSpec] = {m.name: m for m in METRICS}
