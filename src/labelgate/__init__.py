"""LabelGate: agreement statistics and quality gates for human-labelling batches.

>>> import labelgate as lg
>>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0]])
>>> round(float(lg.percent_agreement(r)), 3)
0.667
"""

from labelgate.errors import DesignError, InputError, LabelGateError, ParameterError, Reason
from labelgate.estimate import Estimate
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
from labelgate.ratings import Ratings, ratings_by_pool

__version__ = "0.1.0"

from labelgate import expectations as expectations

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
    "expectations",
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
