"""LabelGate: agreement statistics and quality gates for human-labelling batches.

>>> import labelgate as lg
>>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0]])
>>> round(float(lg.percent_agreement(r)), 3)
0.667

The metrics (``lg.fleiss_kappa``, ``lg.spa``, …; their one list is ``labelgate.metrics.__all__``) are imported on
first use, so a process that only reads a stored decision, prints ``--help`` or stops at an input error does not
pay for them.
"""

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from labelgate._version import __version__ as __version__
from labelgate.core.boxes import boxes_by_pool as boxes_by_pool  # installs Ratings.from_boxes
from labelgate.core.estimate import Estimate as Estimate
from labelgate.core.ratings import Ratings as Ratings
from labelgate.core.ratings import ratings_by_pool as ratings_by_pool
from labelgate.core.sets import SetRatings as SetRatings  # installs level="set" (multi-label) in Ratings.from_long
from labelgate.core.spans import spans_by_pool as spans_by_pool  # installs Ratings.from_spans
from labelgate.errors import DesignError as DesignError
from labelgate.errors import InputError as InputError
from labelgate.errors import LabelGateError as LabelGateError
from labelgate.errors import ParameterError as ParameterError
from labelgate.errors import Reason as Reason

if TYPE_CHECKING:  # type checkers and IDEs see the metrics as attributes of the package
    from labelgate.metrics import *  # noqa: F403

_CORE_NAMES = ["DesignError", "Estimate", "InputError", "LabelGateError", "ParameterError", "Ratings", "Reason",
               "ratings_by_pool"]


def _metrics() -> ModuleType:
    return importlib.import_module("labelgate.metrics")


def __getattr__(name: str) -> object:
    # ``lg.expectations`` stays available, but Great Expectations is imported only when it is asked for
    # (``import labelgate.gx`` registers the expectations).
    if name == "expectations":
        return importlib.import_module("labelgate.gx")
    if name == "read_label_studio":  # pandas and httpx load only when a Label Studio project is read
        from labelgate.pipeline.sources.label_studio import read_label_studio

        return read_label_studio
    if name == "metrics":  # the subpackage, as `import labelgate.metrics` would bind it
        return _metrics()
    if name == "__all__":  # `from labelgate import *` and documentation tools: the core names and every metric
        names = [*_CORE_NAMES, *_metrics().__all__]
        globals()["__all__"] = names
        return names
    if not name.startswith("_") and name in _metrics().__all__:
        value = getattr(_metrics(), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    raise AttributeError(f"module 'labelgate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_CORE_NAMES, *_metrics().__all__})
