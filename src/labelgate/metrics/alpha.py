r"""Distance-based reliability: Krippendorff's alpha and Janson–Olsson's iota.

Both are :math:`1 - D_o / D_e`. Alpha pools all pairable values (chance =
pooled marginals, Krippendorff 2004); iota keeps raters apart (chance = pairs
of distinct raters, Janson & Olsson 2001; xRR paper eq. 1-5).

Nothing here forms pairs of ratings: within-item sums reduce to
:math:`n_i^\top \Delta n_i` per item (or to per-item moments for squared
distances), and the all-pairs sums to products of marginals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from labelgate.core.estimate import DEFAULT_CI_METHOD, DEFAULT_N_BOOT, Estimate
from labelgate.core.ratings import FloatArray, IntArray, Ratings
from labelgate.core.sets import SetRatings
from labelgate.core.tallied import is_tallied
from labelgate.errors import ParameterError, Reason, check_option
from labelgate.metrics._blocks import column_sums, table_totals
from labelgate.metrics._chance import _marginal_totals
from labelgate.metrics._engine import (
    Components,
    ItemStatistic,
    check_bootstrap_args,
    evaluate,
    one_minus_ratio,
    vanishes,
)
from labelgate.metrics._items import ItemView, excluded_single, pairable_counts, square_sums, view
from labelgate.metrics.agreement import build_conger_kappa
from labelgate.metrics.variance_analytic import Analytic, alpha_se, counts_times, judgements_elsewhere
from labelgate.metrics.weights import Weights, symmetric_part, weight_matrix

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    from labelgate.metrics._lazy import lazy

    sp = lazy("scipy.sparse")


def _explain_distance(point: Components) -> tuple[Reason, str] | None:
    if point.get("n_pairable", np.ones(1))[0] == 0:
        return Reason.NO_PAIRABLE_ITEMS, "no item has two or more ratings"
    return (Reason.NO_EXPECTED_DISAGREEMENT,
            "expected disagreement is 0 (all pairable values are equal), so the coefficient is 0/0")


def ratio_distance(values: FloatArray) -> FloatArray:
    """Krippendorff's ratio metric ``((c - k) / (c + k))^2`` (0 when ``c + k = 0``)."""
    total = values[:, None] + values[None, :]
    diff = values[:, None] - values[None, :]
    out = np.zeros_like(total)
    np.divide(diff, total, out=out, where=total != 0)
    return out**2


def ordinal_distance(marginals: np.ndarray) -> np.ndarray:
    r"""Krippendorff's ordinal metric from category frequencies, shape (B, q) -> (B, q, q).

    :math:`\delta_{ck} = (\sum_{g=c}^{k} n_g - (n_c + n_k)/2)^2`.
    """
    cum = np.cumsum(marginals, axis=1)
    q = marginals.shape[1]
    lo = np.minimum.outer(np.arange(q), np.arange(q))
    hi = np.maximum.outer(np.arange(q), np.arange(q))
    before_lo = np.where(lo > 0, cum[:, np.maximum(lo - 1, 0)], 0.0)
    between = cum[:, hi] - before_lo
    half = (marginals[:, :, None] + marginals[:, None, :]) / 2.0
    return (between - half) ** 2


def build_alpha(r: Ratings, codes: IntArray | None = None, weights: Weights | None = None) -> ItemStatistic:
    """Krippendorff's alpha on an item axis (default: pairable items of ``r``).

    ``weights`` None: the distance of ``r.level``; otherwise the distance :math:`1 - w_{kl}` of the weighting
    (the symmetric part of an asymmetric matrix: α pairs ratings without order). ``details`` name the metric and
    where it came from.
    """
    if weights is None:
        stat = _alpha_of_level(r, codes)
        stat.details.update({"distance": r.level, "distance_from": "level"})
        return stat
    w, note = symmetric_part(weight_matrix(r, weights, "krippendorff_alpha"), "krippendorff_alpha")
    name = weights if isinstance(weights, str) else "custom"
    v = view(r, codes)
    if name == "quadratic":  # 1 - w is the squared difference up to a factor, which alpha does not see: moments
        stat = _alpha_interval(v)
    else:
        inv = np.zeros_like(v.n)
        np.divide(1.0, v.n - 1.0, out=inv, where=v.pairable)
        if name in ("identity", "nominal"):
            stat = _alpha_nominal(r, v, inv)
        else:
            stat = _alpha_matrix(r, v, inv, 1.0 - w)
    stat.details.update({"distance": f"1 - w ({name} weights)", "distance_from": "weights", "weights": name})
    if note:
        stat.details["weights_note"] = note
    return stat


def _alpha_matrix(r: Ratings, v: ItemView, inv: FloatArray, delta: FloatArray) -> ItemStatistic:
    r"""α under a fixed distance matrix: each item's :math:`n_i^\top \Delta n_i / (n_i - 1)` and the marginals."""
    counts = pairable_counts(v)
    within_i = np.einsum("ic,ic->i", counts @ delta, counts) * inv
    stat = ItemStatistic(blocks=[within_i[:, None], counts], finalize=_distance_finalize(delta), n_items=v.n_pairable,
                         n_ratings=v.n_ratings_pairable, n_items_excluded=excluded_single(r),
                         explain=_explain_distance)
    stat.analytic = lambda value: alpha_matrix_se(v, within_i, delta, value)
    return stat


def _alpha_of_level(r: Ratings, codes: IntArray | None) -> ItemStatistic:
    """α with the distance of the measurement level (Krippendorff 2004)."""
    v = view(r, codes)
    on = v.pairable
    if r.level == "interval":
        return _alpha_interval(v)
    inv = np.zeros_like(v.n)
    np.divide(1.0, v.n - 1.0, out=inv, where=on)
    if isinstance(r, SetRatings):  # label sets: the level's distance between the distinct sets observed
        return _alpha_matrix(r, v, inv, r.set_distances)
    if r.level == "nominal":
        return _alpha_nominal(r, v, inv)
    counts = pairable_counts(v)

    if r.level == "ordinal":
        def block() -> list[Any]:
            return [(counts[:, :, None] * counts[:, None, :] * inv[:, None, None]).reshape(v.n.size, -1), counts]

        def finalize_ord(sums: list[np.ndarray]) -> Components:
            q = r.n_categories
            marg = sums[1]
            delta = ordinal_distance(marg)
            within = (sums[0].reshape(-1, q, q) * delta).sum(axis=(1, 2))
            between = np.einsum("bc,bck,bk->b", marg, delta, marg)
            n = marg.sum(axis=1)
            return _alpha_components(within, between, n, n * n * delta.max(axis=(1, 2)))

        totals = [((counts * inv[:, None]).T @ counts).reshape(1, -1), table_totals(counts)]
        return ItemStatistic(blocks=None, build_blocks=block, totals=totals, finalize=finalize_ord,
                             n_items=v.n_pairable, n_ratings=v.n_ratings_pairable,
                             n_items_excluded=excluded_single(r), explain=_explain_distance)

    return _alpha_matrix(r, v, inv, ratio_distance(r.category_values))


def alpha_matrix_se(v: ItemView, within_i: FloatArray, delta: np.ndarray, value: float) -> Analytic:
    """Gwet's analytic standard error of α under a fixed distance matrix (:func:`alpha_se`), on the pairable items."""
    on = v.pairable
    pi = _pairable_shares(v)
    return alpha_se(v.n[on], within_i[on], counts_times(v, delta @ pi)[on], float(pi @ delta @ pi), value)


def _pairable_shares(v: ItemView) -> FloatArray:
    """The pairable values' category shares (α's marginals; the point estimate's column sums)."""
    totals = _marginal_totals(v, v.pairable, pooled=True)
    return totals / max(float(totals.sum()), 1.0)


def _distance_finalize(delta: np.ndarray) -> Any:
    """α from the column sums ``[sum of within-item disagreements, pairable marginals]`` under distance ``delta``."""

    def finalize(sums: list[np.ndarray]) -> Components:
        marg = sums[1]
        between = np.einsum("bc,ck,bk->b", marg, delta, marg)
        n = marg.sum(axis=1)
        return _alpha_components(sums[0][:, 0], between, n, n * n * delta.max(initial=0.0))

    return finalize


def _alpha_nominal(r: Ratings, v: ItemView, inv: FloatArray) -> ItemStatistic:
    r"""Nominal α: :math:`n_i^\top (1 - I) n_i = n_i^2 - \sum_c n_{ic}^2` per item (integers: no product), and the
    pairable marginals summed from the integer counts (:func:`labelgate.metrics._chance._marginal_totals`, pooled:
    the float table's sums, exact) — the float copy of the items x categories table is made only for an
    interval's blocks."""
    on = v.pairable
    within_i, within_total = _nominal_within(v, inv)

    def blocks() -> list[Any]:
        return [within_i[:, None], pairable_counts(v)]

    totals = [within_total, _marginal_totals(v, on, pooled=True)]
    stat = ItemStatistic(blocks=None, build_blocks=blocks, totals=totals,
                         finalize=_distance_finalize(1.0 - np.eye(r.n_categories)), n_items=v.n_pairable,
                         n_ratings=v.n_ratings_pairable, n_items_excluded=excluded_single(r),
                         explain=_explain_distance)
    stat.analytic = lambda value: _alpha_nominal_se(v, within_i, value)
    return stat


def _alpha_nominal_se(v: ItemView, within_i: FloatArray, value: float) -> Analytic:
    r""":func:`alpha_se` with the nominal distance: :math:`(\delta \pi)_k = 1 - \pi_k`."""
    on = v.pairable
    pi = _pairable_shares(v)
    r_i = v.n[on]
    return alpha_se(r_i, within_i[on], r_i - counts_times(v, pi)[on], 1.0 - float(pi @ pi), value)


def _nominal_within(v: ItemView, inv: FloatArray) -> tuple[FloatArray, np.ndarray]:
    """Each item's nominal within-item disagreement (read-only) and their sum, made once per view: α's block, which
    normalized κx reads again for both pools on every call."""
    cached = v.shared.get("alpha_nominal_within")
    if cached is None:
        within_i = (v.n * v.n - square_sums(v)) * inv
        total = column_sums(within_i[:, None])
        within_i.flags.writeable = total.flags.writeable = False
        cached = (within_i, total)
        v.shared["alpha_nominal_within"] = cached
    return cached


def interval_within(moments: np.ndarray, pairable: np.ndarray) -> np.ndarray:
    r"""Each item's sum of squared differences over ordered pairs of its values, from its moments
    ``(count, sum, sum of squares)``: :math:`2 (n_i S_i - T_i^2) / (n_i - 1)`, 0 where not ``pairable``.

    The block of interval α (the core) and of the monitor's maintained sums.
    """
    count, total, square = moments[:, 0], moments[:, 1], moments[:, 2]
    within = np.zeros_like(count, dtype=np.float64)
    np.divide(2.0 * (count * square - total**2), count - 1.0, out=within, where=pairable)
    return within


def _alpha_interval(v: ItemView) -> ItemStatistic:
    r = v.ratings
    mom = r.centered_item_moments()[v.codes] * v.pairable[:, None]
    within = interval_within(mom, v.pairable)

    def finalize(sums: list[np.ndarray]) -> Components:
        n, t, s = sums[1][:, 0], sums[1][:, 1], sums[1][:, 2]
        # n s - t^2 is a difference of two terms of size n s: on equal values it leaves a rounding residue
        return _alpha_components(sums[0][:, 0], 2.0 * (n * s - t**2), n, 2.0 * n * s)

    stat = ItemStatistic(blocks=[within[:, None], mom], finalize=finalize, n_items=v.n_pairable,
                         n_ratings=v.n_ratings_pairable, n_items_excluded=excluded_single(r),
                         explain=_explain_distance)
    stat.analytic = lambda value: _alpha_interval_se(mom[v.pairable], within[v.pairable], value)
    return stat


def _alpha_interval_se(moments: np.ndarray, within_i: FloatArray, value: float) -> Analytic:
    r""":func:`alpha_se` with the squared difference, from the item moments: with :math:`\mu`, :math:`m_2` the mean
    and mean square of the pairable values, :math:`\sum_k r_{ik} (\delta\pi)_k = S_{2i} - 2 \mu S_{1i} + r_i m_2`
    and :math:`D_e = 2 (m_2 - \mu^2)`."""
    count, total, square = moments[:, 0], moments[:, 1], moments[:, 2]
    n = max(float(count.sum()), 1.0)
    mu, m2 = float(total.sum()) / n, float(square.sum()) / n
    return alpha_se(count, within_i, square - 2.0 * mu * total + count * m2, 2.0 * (m2 - mu * mu), value)


def _alpha_components(within: np.ndarray, between: np.ndarray, n: np.ndarray, scale: np.ndarray) -> Components:
    """alpha from sum_ck o_ck d_ck (within), sum_ck n_c n_k d_ck (between) and n pairable values.

    ``between`` vanishing relative to ``scale`` (the size of the terms it is computed from) is no expected
    disagreement: alpha is then 0/0, NaN (docs/degenerate-input.md), whatever the units of the data.
    """
    between = np.where(vanishes(between, scale), 0.0, between)
    d_o = np.where(n > 0, within / np.where(n > 0, n, 1.0), np.nan)
    d_e = np.where(n > 1, between / np.where(n > 1, n * (n - 1.0), 1.0), np.nan)
    return {"value": one_minus_ratio(d_o, d_e), "d_o": d_o, "d_e": d_e, "n_pairable": np.where(n > 0, n, 0.0)}


def krippendorff_alpha(r: Ratings, weights: Weights | None = None, *, ci: float | None = None,
                       n_boot: int = DEFAULT_N_BOOT, seed: Any = None, ci_method: str = DEFAULT_CI_METHOD,
                       ) -> Estimate:
    r"""Krippendorff's alpha with the distance of ``r.level``, or of a weighting; missing data allowed.

    .. math::

        \alpha = 1 - (n - 1) \frac{\sum_{c,k} o_{ck} \delta_{ck}}{\sum_{c,k} n_c n_k \delta_{ck}},
        \qquad o_{ck} = \sum_i \frac{n_{ic} n_{ik} - \delta_{ck} n_{ic}}{n_i - 1}

    over pairable items (two or more values); ``n_c`` are the pairable-value
    frequencies and ``n`` their total. Distances (Krippendorff 2004):
    nominal ``1[c != k]``; ordinal
    :math:`(\sum_{g=c}^{k} n_g - (n_c + n_k)/2)^2` over the ordered categories
    (unused categories contribute nothing); interval ``(c - k)^2``; ratio
    ``((c - k)/(c + k))^2``; set (multi-label) the Jaccard or MASI distance
    between the two label sets (:mod:`labelgate.core.sets`). Interval alpha is computed from per-item moments,
    so continuous labels need no category table.

    With ``weights`` the distance is :math:`\delta_{kl} = 1 - w_{kl}` instead: Gwet's (2014) weighted α, irrCAC's
    ``krippen_alpha`` / ``CAC(..., weights=...).krippendorff()``. ``"quadratic"`` is interval α, ``"identity"``
    nominal α, ``"ratio"``, ``"circular"`` and ``"bipolar"`` Krippendorff's metrics of those names on the
    category positions; ``"ordinal"`` is the handbook's rank weighting, *not* Krippendorff's frequency-based
    ordinal metric (which ``level="ordinal"`` without ``weights`` gives).

    Parameters
    ----------
    r : Ratings
    weights : str or array-like, optional
        None (default): the distance of the level the `Ratings` was built with — the caller's choice; the
        constructors' default level is ``"nominal"`` whatever the labels look like, so numeric labels alone never
        make α interval. Otherwise one of the handbook's weightings (:data:`labelgate.weights.WEIGHTS`;
        ``"nominal"`` is ``"identity"``) on the category positions of :func:`labelgate.weights.category_positions`,
        or a q x q matrix of credits (validated as for :func:`labelgate.percent_agreement`; an asymmetric
        matrix enters through its symmetric part :math:`(W + W^\top)/2`, as α pairs ratings without order,
        which ``details["weights_note"]`` says). ``details["distance"]`` and ``details["distance_from"]``
        (``"level"`` or ``"weights"``) state the metric used.
    ci, n_boot, seed, ci_method
        The item-bootstrap interval, as in :func:`labelgate.percent_agreement`.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1, None], [2, 2, 2], [3, 3, 1], [None, 4, 4]], level="interval")
    >>> est = lg.krippendorff_alpha(r)
    >>> round(float(est), 4), est.details["distance"], est.details["distance_from"]
    (0.7025, 'interval', 'level')
    >>> round(float(lg.krippendorff_alpha(r, "identity")), 4), round(float(lg.krippendorff_alpha(r, "linear")), 4)
    (0.7568, 0.7049)
    """
    check_bootstrap_args(ci, n_boot, seed, "krippendorff_alpha", ci_method)
    return evaluate("krippendorff_alpha", build_alpha(r, weights=weights), ci=ci, n_boot=n_boot, seed=seed,
                    ci_method=ci_method)


IotaDistance = Literal["nominal", "interval"]


def build_iota(r: Ratings, codes: IntArray | None = None, distance: IotaDistance | None = None) -> ItemStatistic:
    """Janson–Olsson iota on an item axis (default: pairable items)."""
    distance = distance or _default_iota_distance(r)
    if distance == "nominal":
        # iota keeps its own chance term: the rater marginals over the pairable items, as its interval form
        return build_conger_kappa(r, codes, weights="identity", function="janson_olsson_iota",
                                  marginals="pairable_items")
    v = view(r, codes)
    mom = r.centered_item_moments()[v.codes] * v.pairable[:, None]
    count, total, square = mom[:, 0], mom[:, 1], mom[:, 2]
    mean_sq_diff = np.zeros_like(count)
    np.divide(2.0 * (count * square - total**2), count * (count - 1.0), out=mean_sq_diff, where=v.pairable)
    n_raters = r.n_raters

    def rater_block() -> sp.csr_matrix:
        rows, axis_pos = v.rows_on_axis()
        x = r.values[rows] - r.moment_center
        cols = (r.rater_codes[rows] * 3)[:, None] + np.arange(3)
        data = np.column_stack([np.ones_like(x), x, x * x])
        return sp.csr_matrix((data.ravel(), (np.repeat(axis_pos, 3), cols.ravel())),
                             shape=(v.codes.size, n_raters * 3))

    def finalize(sums: list[np.ndarray]) -> Components:
        n_pair = sums[0][:, 1]
        d_o = np.where(n_pair > 0, sums[0][:, 0] / np.where(n_pair > 0, n_pair, 1.0), np.nan)
        m = sums[1].reshape(-1, n_raters, 3)
        n_g = m[:, :, 0]
        active = n_g > 0
        safe = np.where(active, n_g, 1.0)
        second, first = m[:, :, 2] / safe, m[:, :, 1] / safe
        k = active.sum(axis=1).astype(np.float64)
        spread = 2.0 * (k - 1.0) * second.sum(axis=1)  # the size of the terms of the difference below
        between = spread - 2.0 * (first.sum(axis=1) ** 2 - (first**2).sum(axis=1))
        between = np.where(vanishes(between, spread), 0.0, between)
        d_e = np.where(k > 1, between / np.where(k > 1, k * (k - 1.0), 1.0), np.nan)
        return {"value": one_minus_ratio(d_o, d_e), "d_o": d_o, "d_e": d_e, "n_pairable": n_pair}

    obs = np.column_stack([mean_sq_diff, v.pairable.astype(np.float64)])

    def rater_totals() -> np.ndarray:
        if is_tallied(r):  # aggregated in a database: per rater and category counts of the pairable items
            x = r.category_values - r.moment_center
            table = r.rater_category_table(v.codes[v.pairable]).astype(np.float64)
            return (table @ np.column_stack([np.ones_like(x), x, x * x])).ravel()
        rows, _ = v.rows_on_axis()
        x = r.values[rows] - r.moment_center
        g = r.rater_codes[rows]
        sums = [np.bincount(g, weights=w, minlength=n_raters) for w in (np.ones_like(x), x, x * x)]
        return np.column_stack(sums).ravel()

    return ItemStatistic(blocks=None, build_blocks=lambda: [obs, rater_block()],
                         totals=[obs.sum(axis=0), rater_totals()],
                         finalize=finalize, n_items=v.n_pairable, n_ratings=v.n_ratings_pairable,
                         n_items_excluded=excluded_single(r), explain=_explain_distance,
                         se_unavailable=lambda: judgements_elsewhere(r))


def _default_iota_distance(r: Ratings) -> IotaDistance:
    if r.level == "nominal":
        return "nominal"
    if r.level in ("interval", "ratio"):
        return "interval"
    raise ParameterError("janson_olsson_iota defines nominal and interval distances only; for ordinal ratings "
                         "pass distance='nominal' or distance='interval' (squared rank difference).",
                         parameter="distance", value=None)


def janson_olsson_iota(r: Ratings, distance: IotaDistance | None = None, *, ci: float | None = None,
                       n_boot: int = DEFAULT_N_BOOT, seed: Any = None, ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    r"""Janson & Olsson's iota, :math:`\iota = 1 - d_o / d_e` (xRR paper eq. 1-5).

    :math:`d_o` is the mean over pairable items of the mean disagreement of the
    item's rater pairs; :math:`d_e` the mean over pairs of distinct raters
    :math:`(g, h)` of the disagreement between a random rating of ``g`` and a
    random rating of ``h`` (each rater's own ratings). On a complete design
    these are exactly eq. 2 and eq. 5; with missing data every rating is used
    where it is observed. ``distance="nominal"`` (eq. 4) makes iota equal to
    Conger's kappa; ``"interval"`` (eq. 3, squared difference of the values;
    ranks for ordinal labels) is computed from per-rater moments.

    Parameters
    ----------
    distance : {"nominal", "interval"}, optional
        Default: nominal for nominal labels, interval for interval/ratio;
        required for ordinal labels.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 2], [2, 2], [3, 4], [4, 4]], level="interval")
    >>> round(float(lg.janson_olsson_iota(r)), 4)
    0.8
    """
    check_bootstrap_args(ci, n_boot, seed, "janson_olsson_iota", ci_method)
    if distance is not None:
        check_option(distance, ("nominal", "interval"), "distance", "janson_olsson_iota")
    stat = build_iota(r, distance=distance)
    return evaluate("janson_olsson_iota", stat, ci=ci, n_boot=n_boot, seed=seed, ci_method=ci_method)

