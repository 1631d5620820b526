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
    bennett_s,
    cohen_kappa,
    conger_kappa,
    cross_kappa,
    fleiss_kappa,
    gwet_ac,
    janson_olsson_iota,
    krippendorff_alpha,
    normalized_cross_kappa,
    percent_agreement,
    scott_pi,
    spa,
    specific_agreement,
)
from labelgate.ratings import Ratings, ratings_by_pool

__version__ = "0.1.0"

from labelgate import expectations as expectations  # noqa: E402  (registers the GX expectations; keep last)

__all__ = [
    "METRICS",
    "DesignError",
    "Estimate",
    "InputError",
    "LabelGateError",
    "ParameterError",
    "Ratings",
    "Reason",
    "bennett_s",
    "cohen_kappa",
    "conger_kappa",
    "cross_kappa",
    "expectations",
    "fleiss_kappa",
    "gwet_ac",
    "janson_olsson_iota",
    "krippendorff_alpha",
    "normalized_cross_kappa",
    "percent_agreement",
    "ratings_by_pool",
    "scott_pi",
    "spa",
    "specific_agreement",
]
