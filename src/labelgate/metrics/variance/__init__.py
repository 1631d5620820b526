r"""Variance components of sparse crossed item x rater designs, by the method of moments in O(N).

Model (the blog's "parametric" section; Girard's ICC slides): the value given
by rater :math:`j` to item :math:`i` is

.. math::

    Y_{ij} = \mu + a_i + b_j + e_{ij}, \qquad
    a_i \sim (0, \sigma^2_{item}),\; b_j \sim (0, \sigma^2_{rater}),\;
    e_{ij} \sim (0, \sigma^2_{residual}),

all independent, observed on an arbitrary (sparse, unbalanced) set of
:math:`N` cells. Following Gao & Owen (2017, "Efficient moment calculations
for variance components in large unbalanced crossed random effects models",
Electron. J. Statist. 11), three U-statistics — half the sum of squared
differences over ordered pairs of ratings of the same item, of the same rater,
and over all pairs —

.. math::

    U_{item} = \sum_i (N_i Q_i - S_i^2), \quad
    U_{rater} = \sum_j (M_j R_j - T_j^2), \quad
    U_{all} = N Q - S^2

(:math:`N_i, S_i, Q_i` count, sum and sum of squares of item :math:`i`;
:math:`M_j, T_j, R_j` the same for rater :math:`j`) have expectations linear in
the three variances with coefficients from the design counts:

.. math::

    E U_{item}  &= (\textstyle\sum_i N_i^2 - N)(\sigma^2_{rater} + \sigma^2_{residual}) \\
    E U_{rater} &= (\textstyle\sum_j M_j^2 - N)(\sigma^2_{item} + \sigma^2_{residual}) \\
    E U_{all}   &= (N^2 - \textstyle\sum_i N_i^2)\sigma^2_{item}
                 + (N^2 - \textstyle\sum_j M_j^2)\sigma^2_{rater} + (N^2 - N)\sigma^2_{residual}.

Solving this 3 x 3 system gives unbiased estimators that cost a few
``bincount`` passes over the ratings (derivation in
``docs/variance-components.md``). On a complete design they equal the two-way
ANOVA (expected mean squares) estimators.

Policies
--------
* Labels must be numeric: interval/ratio values, ordinal ranks 0..q-1, or a
  binary nominal label coded 0/1 (category order). Other nominal labels raise.
* Items with a single rating are excluded (the core's within-pool policy) and
  reported in ``n_items_excluded``.
* **Negative estimates** (sampling noise when a component is small) are
  reported as ``*_raw`` and truncated at 0; shares (ICCs) use the truncated
  components. ``negative`` lists what was truncated.
* Intervals: the two-way ("pigeonhole", Owen 2007) bootstrap by default —
  items *and* raters are resampled independently (multiplicities ``W_i``,
  ``V_j``) and rating (i, j) gets weight ``W_i * V_j``; ``resample="items"``
  resamples items only. Each replicate is the weighted U-statistic over pairs
  of distinct *original* ratings (so copies never form zero-difference pairs),
  evaluated from sparse products of per-item / per-rater sums, never by
  re-reading the data. See ``docs/variance-components.md`` §3.

Modules (each imports only the ones above it; this package re-exports their public names):

* ``design`` — :class:`Crossed`, the centred values with their per-item / per-rater sums;
* ``moments`` — the weighted U-statistics, their coefficients and the solution of the equations;
* ``bootstrap`` — the two-way (pigeonhole) resampling and percentile intervals;
* ``fit`` — the point fit of a view: design counts, why a quantity is undefined, replicates;
* ``components`` — :func:`variance_components` and its result :class:`VarianceComponents`;
* ``shares`` — :func:`item_icc` and :func:`labeler_icc` (observed scale here, latent scale in ``_logit``).
"""

# level_of is metrics._intervals'; re-exported because metrics.icc, .phi and .xcc import it from here
from labelgate.metrics._intervals import level_of
from labelgate.metrics.variance.bootstrap import (
    CHUNK_CELLS,
    RESAMPLE,
    Resample,
    bootstrap_replicates,
    check_resample,
    interval_of,
    two_way_draws,
)
from labelgate.metrics.variance.components import VarianceComponents, variance_components
from labelgate.metrics.variance.design import Crossed, crossed, numeric_values
from labelgate.metrics.variance.moments import Arrays, component_sums, solve_components, weighted_item_moments
from labelgate.metrics.variance.shares import SCALES, Scale, item_icc, labeler_icc

__all__ = [
    "CHUNK_CELLS",
    "RESAMPLE",
    "SCALES",
    "Arrays",
    "Crossed",
    "Resample",
    "Scale",
    "VarianceComponents",
    "bootstrap_replicates",
    "check_resample",
    "component_sums",
    "crossed",
    "interval_of",
    "item_icc",
    "labeler_icc",
    "level_of",
    "numeric_values",
    "solve_components",
    "two_way_draws",
    "variance_components",
    "weighted_item_moments",
]
