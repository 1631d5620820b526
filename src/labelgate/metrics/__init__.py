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
from labelgate.metrics.cross import cross_kappa, normalized_cross_kappa
from labelgate.metrics.registry import METRICS, METRICS_BY_NAME, MetricSpec
from labelgate.metrics.spa import spa

__all__ = [
    "METRICS",
    "METRICS_BY_NAME",
    "MetricSpec",
    "bennett_s",
    "cohen_kappa",
    "conger_kappa",
    "cross_kappa",
    "fleiss_kappa",
    "gwet_ac",
    "janson_olsson_iota",
    "krippendorff_alpha",
    "normalized_cross_kappa",
    "percent_agreement",
    "scott_pi",
    "spa",
    "specific_agreement",
]
