r"""Per-rater diagnostics: agreement with the trusted pool and with co-raters, volume, bias, flags.

For every rater :math:`g` of a pool (usually the crowd) this module computes, in :math:`O(N)` over the
judgements (no raters x raters matrix; only pairs of raters that actually co-rated an item are formed):

* ``kappa_vs_trusted`` — cross-replication kappa :math:`\kappa_x(g, T)` of the rater (one rating per item)
  against the trusted pool on the items both rated (xRR paper eq. 9-11 with :math:`R_i = 1`):

  .. math::

      d_o = \sum_i \frac{1 + S_i}{R + S} \frac{x_i^\top D\, y_i}{S_i}, \qquad
      d_e = \frac{x_\cdot^\top D\, y_\cdot}{R\, S}, \qquad \kappa_x = 1 - d_o / d_e,

  where :math:`x_i` is the one-hot label of :math:`g` on item :math:`i`, :math:`y_i` the trusted counts,
  :math:`S_i` their total, :math:`R` the number of shared items and :math:`S = \sum_i S_i`. The distance
  :math:`D` follows the level as in :func:`labelgate.cross_kappa`: nominal :math:`1[c \ne k]`, ordinal
  Krippendorff's ordinal metric, interval/ratio squared difference (from moments).
* ``loo_agreement`` — the same kappa of :math:`g` against its co-raters of the same pool (leave-one-out:
  :math:`y_i` = the item's counts in the pool without :math:`g`'s rating), on items with another rating.
* ``bias`` — nominal/ordinal: total-variation distance
  :math:`\tfrac12 \sum_c |p_{gc} - r_{gc}|` between the rater's label distribution and the distribution of
  the co-raters' labels **on the same items** (so item mix does not count as bias); interval/ratio: the mean
  difference (rater minus co-raters) on those items.
* ``flags`` — ``low_agreement`` when the one-sided score test of "agreement at least ``min_agreement``" is
  rejected by Benjamini-Hochberg across the pool's raters at the false discovery rate ``fdr`` (raters with
  fewer than ``min_shared_items`` trusted items are tested on the leave-one-out agreement instead;
  ``agreement_basis`` says which); every other rater gets ``needs_items``, the workload at which the test
  would find a rater ``effect`` below the minimum with probability ``power``, and ``judged`` is false while
  it has fewer ("too few items to judge"); ``collusion`` when the rater belongs to a pair whose agreement is
  far above each one's agreement with everyone else (see :func:`evaluate_pairs`), with the partner ids in
  ``partners``.

Intervals are Wilson score intervals of the rater's disagreement proportion, mapped to the kappa scale
(:mod:`~labelgate.metrics.diagnostics.judging`; delta-method intervals for interval and ratio labels); both
are functions of additive sums, which is what incremental monitoring maintains.

The building blocks (:func:`rater_item_rows`, :func:`kappa_finalize`, :func:`delta_interval`,
:func:`co_rating_pairs`, :func:`evaluate_pairs`, :func:`rater_rows_from_sums`, :func:`judge_rows`) are public
so that :mod:`labelgate.monitor` maintains the same sums incrementally and gets the same numbers.

Modules (each imports only the ones above it; this package re-exports their public names):

* ``blocks`` — the per-judgement kappa blocks and the kappa of their sums;
* ``intervals`` — delta-method intervals from sums, the Wilson interval of a proportion;
* ``pairs`` — co-rating pairs of raters and the collusion test;
* ``sums`` — :class:`RaterSums`: every rater's sums against the trusted pool and its co-raters;
* ``judging`` — score intervals and tests of a rater's agreement, Benjamini-Hochberg, power and workload;
* ``rows`` — the per-rater rows of the report contract and :func:`judge_rows` (the ``low_agreement`` flags);
* ``batch`` — :func:`rater_diagnostics` of a whole batch and :func:`design_summary`.
"""

from labelgate.metrics.diagnostics.batch import design_summary, diagnostics_from_sums, rater_diagnostics
from labelgate.metrics.diagnostics.blocks import Kind, block_width, distance_kind, kappa_finalize, rater_item_rows
from labelgate.metrics.diagnostics.intervals import delta_interval, wilson_interval
from labelgate.metrics.diagnostics.judging import (
    agreement_test,
    benjamini_hochberg,
    items_needed,
    power,
    score_p_value,
)
from labelgate.metrics.diagnostics.pairs import PairTable, co_rating_pairs, collusion_partners, evaluate_pairs
from labelgate.metrics.diagnostics.rows import (
    judge_rows,
    judgement_summary,
    rater_rows_from_sums,
    too_few_text,
)
from labelgate.metrics.diagnostics.sums import RaterSums, context_sums, grouped_sums, judgement_sums, rater_sums

__all__ = [
    "Kind",
    "PairTable",
    "RaterSums",
    "agreement_test",
    "benjamini_hochberg",
    "block_width",
    "co_rating_pairs",
    "collusion_partners",
    "context_sums",
    "delta_interval",
    "design_summary",
    "diagnostics_from_sums",
    "distance_kind",
    "evaluate_pairs",
    "grouped_sums",
    "items_needed",
    "judge_rows",
    "judgement_summary",
    "judgement_sums",
    "kappa_finalize",
    "power",
    "rater_diagnostics",
    "rater_item_rows",
    "rater_rows_from_sums",
    "rater_sums",
    "score_p_value",
    "too_few_text",
    "wilson_interval",
]
