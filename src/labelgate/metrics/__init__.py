"""Metrics core: numpy/scipy only, pure functions of `Ratings` returning `Estimate`."""

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
from labelgate.metrics.planning import ItemPlan, plan_items, raters_needed, spearman_brown
from labelgate.metrics.registry import METRICS, METRICS_BY_NAME, NOT_METRICS, MetricSpec
from labelgate.metrics.spa import spa
from labelgate.metrics.spans import matched_iou, span_f1
from labelgate.metrics.variance import VarianceComponents, item_icc, labeler_icc, variance_components
from labelgate.metrics.xcc import cross_correlation, disattenuated_correlation

from labelgate.metrics import weights  # isort: skip  (the public module of the weightings: lg.weights)

__all__ = [
    "METRICS",
    "METRICS_BY_NAME",
    "NOT_METRICS",
    "ItemPlan",
    "MetricSpec",
    "VarianceComponents",
    "bangdiwala_b",
    "bennett_s",
    "cohen_kappa",
    "conger_kappa",
    "cross_correlation",
    "cross_kappa",
    "disattenuated_correlation",
    "fleiss_kappa",
    "gwet_ac",
    "icc",
    "item_icc",
    "janson_olsson_iota",
    "krippendorff_alpha",
    "labeler_icc",
    "matched_iou",
    "normalized_cross_kappa",
    "percent_agreement",
    "phi_agreement",
    "plan_items",
    "raters_needed",
    "scott_pi",
    "spa",
    "span_f1",
    "spearman_brown",
    "specific_agreement",
    "variance_components",
    "weights",
]
