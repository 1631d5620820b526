"""The core: ``Ratings`` (integer codes and sufficient statistics), ``Estimate`` and label keying; numpy only."""

from labelgate.core.estimate import Estimate
from labelgate.core.ratings import Ratings, ratings_by_pool

__all__ = ["Estimate", "Ratings", "ratings_by_pool"]
