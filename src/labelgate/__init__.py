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
from labelgate.metrics import *  # noqa: F403  (the metrics; their one list is labelgate.metrics.__all__)
from labelgate.metrics import __all__ as _metrics_all

__all__ = [
    "DesignError",
    "Estimate",
    "InputError",
    "LabelGateError",
    "ParameterError",
    "Ratings",
    "Reason",
    "ratings_by_pool",
    *_metrics_all,
]


def __getattr__(name: str) -> object:
    # ``lg.expectations`` stays available, but Great Expectations is imported only when it is asked for
    # (``import labelgate.gx`` registers the expectations).
    if name == "expectations":
        import importlib

        return importlib.import_module("labelgate.gx")
    if name == "read_label_studio":  # pandas and httpx load only when a Label Studio project is read
        from labelgate.pipeline.sources.label_studio import read_label_studio

        return read_label_studio
    raise AttributeError(f"module 'labelgate' has no attribute {name!r}")
