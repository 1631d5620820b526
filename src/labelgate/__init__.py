"""LabelGate: agreement statistics and quality gates for human-labelling batches.

>>> import labelgate as lg
>>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0]])
>>> round(float(lg.percent_agreement(r)), 3)
0.667
"""

from labelgate._version import __version__ as __version__
from labelgate.core.estimate import Estimate
from labelgate.core.ratings import Ratings, ratings_by_pool
from labelgate.errors import DesignError, InputError, LabelGateError, ParameterError, Reason
from labelgate.metrics import (
    METRICS,
    ItemPlan,
    VarianceComponents,
    bennett_s,
    cohen_kappa,
    conger_kappa,
    cross_correlation,
    cross_kappa,
    disattenuated_correlation,
    fleiss_kappa,
    gwet_ac,
    icc,
    item_icc,
    janson_olsson_iota,
    krippendorff_alpha,
    labeler_icc,
    normalized_cross_kappa,
    percent_agreement,
    phi_agreement,
    plan_items,
    raters_needed,
    scott_pi,
    spa,
    spearman_brown,
    specific_agreement,
    variance_components,
)

__all__ = [
    "METRICS",
    "DesignError",
    "Estimate",
    "InputError",
    "ItemPlan",
    "LabelGateError",
    "ParameterError",
    "Ratings",
    "Reason",
    "VarianceComponents",
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
    "normalized_cross_kappa",
    "percent_agreement",
    "phi_agreement",
    "plan_items",
    "raters_needed",
    "ratings_by_pool",
    "scott_pi",
    "spa",
    "spearman_brown",
    "specific_agreement",
    "variance_components",
]


def __getattr__(name: str) -> object:
    # ``lg.expectations`` stays available, but Great Expectations is imported only when it is asked for
    # (``import labelgate.gx`` registers the expectations).
    if name == "expectations":
        import importlib

        return importlib.import_module("labelgate.gx")
    raise AttributeError(f"module 'labelgate' has no attribute {name!r}")
