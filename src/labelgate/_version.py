"""The package version, at the bottom of the layers so that every layer may read it."""

__version__ = "0.1.0"

#: Version of the metrics' definitions. Raised whenever a coefficient's definition changes (e.g. the handbook's
#: treatment of single-rated items), so that decisions computed under an older definition are never served again:
#: it is part of every gate run's inputs digest.
METRIC_DEFINITIONS = 3  # 2: the handbook's marginals; 3: BCa intervals by default
