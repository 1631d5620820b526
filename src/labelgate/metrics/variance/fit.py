"""The moment fit of one crossed view: the point solution, its design counts, why it is undefined, replicates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from labelgate.errors import Reason
from labelgate.metrics.variance.bootstrap import bootstrap_replicates
from labelgate.metrics.variance.design import Crossed
from labelgate.metrics.variance.moments import Arrays, component_sums, solve_components

COMPONENTS = ("item", "rater", "residual")


@dataclass(frozen=True)
class ComponentFit:
    """Moment sums and solved components of a :class:`Crossed` view at unit weights (the point estimate).

    Attributes
    ----------
    c : Crossed
        The data view.
    sums : dict of arrays
        :func:`component_sums` at unit weights (arrays of length 1).
    point : dict of arrays
        :func:`solve_components` of ``sums``.
    """

    c: Crossed
    sums: Arrays
    point: Arrays

    @classmethod
    def of(cls, c: Crossed) -> ComponentFit:
        """The point fit of ``c``."""
        sums = component_sums(c, np.ones((1, c.n_axis)), None)
        return cls(c, sums, solve_components(sums))

    def value(self, key: str) -> float:
        """One solved quantity (``item``, ``rater_share``, ``total``, ...) as a float."""
        return float(self.point[key][0])

    @property
    def negative(self) -> tuple[str, ...]:
        """Components whose raw estimate was negative (and was truncated at 0)."""
        return tuple(k for k in COMPONENTS if self.value(f"{k}_raw") < 0)

    @property
    def n_items(self) -> int:
        """Items with two or more ratings (the ones that enter the components)."""
        return int(self.c.pairable.sum())

    @property
    def n_items_excluded(self) -> int:
        """Items with a single rating."""
        return int((~self.c.pairable).sum())

    @property
    def n_raters(self) -> int:
        """Raters with a rating of a pairable item."""
        return int((self.c.rater_m[:, 0] > 0).sum())

    @property
    def n_ratings(self) -> int:
        """Ratings of pairable items."""
        return int(self.sums["N"][0])

    def reason(self, want: str) -> tuple[Reason, str] | None:
        """Why ``want`` (``item_share`` / ``rater_share`` / ``total``) is NaN, or None."""
        if float(self.sums["a"][0]) <= 0:
            return Reason.NO_PAIRABLE_ITEMS, "no item has two or more ratings"
        if want == "rater_share" and not np.isfinite(self.value("rater")):
            return (Reason.NO_PAIRABLE_ITEMS, "no rater rated two or more items, so the rater variance is "
                    "confounded with the residual variance")
        total = self.value("total")
        if np.isfinite(total) and total <= 0:
            return (Reason.NO_EXPECTED_DISAGREEMENT,
                    "the total variance is 0 (all ratings equal): expected disagreement is 0")
        if want.endswith("_share") or not np.isfinite(total):
            return Reason.NO_VARIANCE, "the variance components are not identifiable on this design"
        return None

    def replicates(self, n_boot: int, seed: Any, resample: str) -> Arrays:
        """:func:`solve_components` over ``n_boot`` bootstrap resamples (``resample``: items and raters, or items)."""
        c = self.c
        return bootstrap_replicates(lambda w, vs: solve_components(component_sums(c, w, vs[0])), n_boot, seed,
                                    c.n_axis, [c.n_raters], resample)
