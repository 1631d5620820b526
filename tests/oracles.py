r"""Brute-force oracles for the metrics core, written as literally as possible from the published formulas.

Every oracle takes a small *wide* matrix ``X`` (items x raters, ``nan`` = missing) and the ordered
category list, and loops explicitly over items, raters and pairs of ratings. Arithmetic is exact
(:class:`fractions.Fraction`; every float is a binary fraction) so that a 0/0 coefficient is
recognised exactly and returned as ``nan``. Only the SPA inverse-variance weights, which come from an
enumeration of up to ``C**n`` labelings, are computed in the number type of the class distribution
you pass (floats for speed in the random tests, fractions in the exact tests).

Nothing here is vectorised or clever on purpose: these functions are slow, keep the data small
(a dozen items, a handful of raters). The core (``src/labelgate/metrics``) computes the same numbers
from sufficient statistics; ``tests/metrics/test_oracles.py`` checks the two agree.

Conventions shared with the core (``common.md``, "documented policies"):

* *pairable* items are the items with two or more ratings; items with one rating are excluded from
  the observed agreement of every within-pool coefficient; the chance-agreement marginals of Gwet's
  AC1/AC2, Conger's and Fleiss' kappa use every rated item by default (Gwet's *Handbook of Inter-Rater
  Reliability*, 2014; ``marginals="all_rated_items"``) or the pairable items only
  (``marginals="pairable_items"``); Krippendorff's alpha and iota use the pairable items only;
* category *positions* (for linear/quadratic weights and squared distances) are the ranks
  ``0..q-1`` of the category list for nominal/ordinal levels and the category values for
  interval/ratio levels.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np

NAN = float("nan")
Number = Fraction | float

# ----------------------------------------------------------------------------------------- helpers


def exact(value: float) -> Fraction:
    """The exact rational value of a float (or int)."""
    return Fraction(value)


def item_ratings(X: Any) -> list[list[tuple[int, Fraction]]]:
    """For each item (row), the list of ``(rater, value)`` of its non-missing ratings."""
    out = []
    for row in np.asarray(X, dtype=float):
        out.append([(r, exact(v)) for r, v in enumerate(row) if not math.isnan(v)])
    return out


def positions(categories: Sequence[float], level: str) -> dict[Fraction, Fraction]:
    """Category value -> numeric position: rank for nominal/ordinal, the value itself for interval/ratio."""
    cats = [exact(c) for c in categories]
    if level in ("interval", "ratio"):
        return {c: c for c in cats}
    return {c: Fraction(k) for k, c in enumerate(cats)}


def agreement_weight(a: Fraction, b: Fraction, pos: dict[Fraction, Fraction], weights: str) -> Fraction:
    """Gwet (2014, ch. 3) agreement weights from category positions ``x``.

    identity ``1[a = b]``; linear ``1 - |x_a - x_b| / (x_max - x_min)``;
    quadratic ``1 - (x_a - x_b)^2 / (x_max - x_min)^2``.
    """
    if weights == "identity" or len(pos) < 2:
        return Fraction(int(a == b))
    span = max(pos.values()) - min(pos.values())
    d = abs(pos[a] - pos[b]) / span
    if weights == "linear":
        return 1 - d
    if weights == "quadratic":
        return 1 - d * d
    raise ValueError(weights)


def weight_total(categories: Sequence[float], level: str, weights: str) -> Fraction:
    """``T_w = sum_{k,l} w_kl`` over the category list."""
    pos = positions(categories, level)
    return sum((agreement_weight(a, b, pos, weights) for a in pos for b in pos), Fraction(0))


def chance_corrected(p_o: Number, p_e: Number) -> Number:
    """``(p_o - p_e) / (1 - p_e)``; nan when ``p_e = 1`` (0/0) or either part is undefined."""
    if _undefined(p_o) or _undefined(p_e) or p_e == 1:
        return NAN
    return (p_o - p_e) / (1 - p_e)


def one_minus_ratio(d_o: Number, d_e: Number) -> Number:
    """``1 - d_o / d_e``; nan when ``d_e = 0`` or either part is undefined."""
    if _undefined(d_o) or _undefined(d_e) or d_e == 0:
        return NAN
    return 1 - d_o / d_e


def _undefined(x: Number) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _pairable(X: Any) -> list[list[tuple[int, Fraction]]]:
    return [item for item in item_ratings(X) if len(item) >= 2]


def _marginal_items(X: Any, marginals: str) -> list[list[tuple[int, Fraction]]]:
    """The items whose ratings enter the chance-agreement marginals."""
    if marginals == "all_rated_items":
        return [item for item in item_ratings(X) if len(item) >= 1]
    if marginals == "pairable_items":
        return _pairable(X)
    raise ValueError(marginals)


# ----------------------------------------------------------------------- agreement coefficients


def percent_agreement(X: Any, categories: Sequence[float], level: str = "nominal",
                      weights: str = "identity") -> dict[str, Number]:
    r"""Observed agreement :math:`p_o` (Girard's ``mAGREE``; Gwet 2014, ch. 2 and 3).

    For each item with :math:`n_i \ge 2` ratings, the (weighted) share of agreeing *ordered pairs of
    distinct ratings*; then the mean over those items:

    .. math:: p_o = \frac{1}{n'} \sum_{i: n_i \ge 2} \frac{1}{n_i(n_i-1)}
              \sum_{a \ne b} w(x_{ia}, x_{ib})
    """
    pos = positions(categories, level)
    total, n_pairable = Fraction(0), 0
    for item in _pairable(X):
        m = len(item)
        agree = Fraction(0)
        for a in range(m):
            for b in range(m):
                if a != b:
                    agree += agreement_weight(item[a][1], item[b][1], pos, weights)
        total += agree / (m * (m - 1))
        n_pairable += 1
    p_o: Number = total / n_pairable if n_pairable else NAN
    return {"value": p_o, "p_o": p_o, "n_pairable": n_pairable}


def bennett_s(X: Any, categories: Sequence[float], level: str = "nominal",
              weights: str = "identity") -> dict[str, Number]:
    r"""Bennett, Alpert & Goldstein's S / Brennan–Prediger: :math:`p_e = \sum_{k,l} w_{kl} / q^2`.

    With identity weights :math:`p_e = 1/q` (Bennett et al. 1954; Girard's ``mSSCORE``).
    """
    p_o = percent_agreement(X, categories, level, weights)["p_o"]
    q = len(categories)
    p_e = weight_total(categories, level, weights) / (q * q)
    return {"value": chance_corrected(p_o, p_e), "p_o": p_o, "p_e": p_e}


def cohen_kappa(X: Any, categories: Sequence[float], level: str = "nominal",
                weights: str = "identity") -> dict[str, Number]:
    r"""Cohen's (1960) kappa, weighted as in Cohen (1968), for the two columns of ``X``.

    On the items both raters judged: :math:`p_o = \frac1n \sum_i w(x_{1i}, x_{2i})`,
    :math:`p_e = \sum_{k,l} w_{kl}\, p_{1k} p_{2l}` with each rater's marginal proportions over
    those items; :math:`\kappa = (p_o - p_e)/(1 - p_e)`.
    """
    pos = positions(categories, level)
    pairs = [(row[0], row[1]) for row in np.asarray(X, dtype=float) if not np.isnan(row[:2]).any()]
    if not pairs:
        return {"value": NAN, "p_o": NAN, "p_e": NAN}
    n = len(pairs)
    p_o = sum((agreement_weight(exact(a), exact(b), pos, weights) for a, b in pairs), Fraction(0)) / n
    p_e = Fraction(0)
    for k in pos:
        p1k = Fraction(sum(exact(a) == k for a, _ in pairs), n)
        for l in pos:  # noqa: E741
            p2l = Fraction(sum(exact(b) == l for _, b in pairs), n)
            p_e += agreement_weight(k, l, pos, weights) * p1k * p2l
    return {"value": chance_corrected(p_o, p_e), "p_o": p_o, "p_e": p_e}


def conger_kappa(X: Any, categories: Sequence[float], level: str = "nominal",
                 weights: str = "identity", marginals: str = "all_rated_items") -> dict[str, Number]:
    r"""Conger's (1980) kappa: chance agreement averaged over pairs of distinct raters.

    .. math:: p_e = \frac{1}{r(r-1)} \sum_{g} \sum_{h \ne g} \sum_{k,l} w_{kl}\, p_{gk}\, p_{hl}

    where ``r`` counts the raters with at least one rating on the marginal items and
    :math:`p_{gk}` is the share of rater ``g``'s own ratings on those items that are ``k``: all his
    ratings (Gwet 2014 with missing ratings; irrCAC ``conger``) or those on pairable items
    (``marginals="pairable_items"``; Girard's ``mKAPPA`` on data without single-rated items).
    """
    pos = positions(categories, level)
    p_o = percent_agreement(X, categories, level, weights)["p_o"]
    own: dict[int, list[Fraction]] = {}
    for item in _marginal_items(X, marginals):
        for rater, value in item:
            own.setdefault(rater, []).append(value)
    raters = sorted(own)
    r = len(raters)
    if r < 2:
        return {"value": NAN, "p_o": p_o, "p_e": NAN, "n_raters": r}
    marginal = {g: {k: Fraction(sum(v == k for v in own[g]), len(own[g])) for k in pos} for g in raters}
    p_e = Fraction(0)
    for g in raters:
        for h in raters:
            if g == h:
                continue
            for k in pos:
                for l in pos:  # noqa: E741
                    p_e += agreement_weight(k, l, pos, weights) * marginal[g][k] * marginal[h][l]
    p_e /= r * (r - 1)
    return {"value": chance_corrected(p_o, p_e), "p_o": p_o, "p_e": p_e, "n_raters": r}


def fleiss_kappa(X: Any, categories: Sequence[float], marginals: str = "all_rated_items") -> dict[str, Number]:
    r"""Gwet's generalised Fleiss kappa (irrCAC ``fleiss``): :math:`\pi_k` is the mean over the marginal items
    (every rated item by default) of :math:`n_{ik}/n_i`, :math:`p_e = \sum_k \pi_k^2`, :math:`p_o` over the
    pairable items. ``marginals="pairable_items"`` is :func:`fleiss_kappa_pooled`."""
    if marginals == "pairable_items":
        return fleiss_kappa_pooled(X, categories)
    return fleiss_kappa_item_mean(X, categories, marginals)


def fleiss_kappa_pooled(X: Any, categories: Sequence[float]) -> dict[str, Number]:
    r"""Fleiss' (1971) kappa with *pooled* marginals over pairable items.

    :math:`P_i = \frac{1}{n_i(n_i-1)} \sum_j n_{ij}(n_{ij}-1)`, :math:`\bar P` their mean,
    :math:`p_j = \sum_i n_{ij} / \sum_i n_i` (every rating counts once; Fleiss' :math:`1/(Nn)` when
    all :math:`n_i = n`), :math:`\bar P_e = \sum_j p_j^2`.
    """
    pairable = _pairable(X)
    p_bar = Fraction(0)
    for item in pairable:
        m = len(item)
        p_bar += Fraction(sum(item[a][1] == item[b][1] for a in range(m) for b in range(m) if a != b),
                          m * (m - 1))
    if not pairable:
        return {"value": NAN, "p_o": NAN, "p_e": NAN}
    p_bar /= len(pairable)
    total = sum(len(item) for item in pairable)
    p_e = Fraction(0)
    for c in (exact(c) for c in categories):
        p_j = Fraction(sum(v == c for item in pairable for _, v in item), total)
        p_e += p_j * p_j
    return {"value": chance_corrected(p_bar, p_e), "p_o": p_bar, "p_e": p_e}


def fleiss_kappa_item_mean(X: Any, categories: Sequence[float], marginals: str = "all_rated_items",
                           ) -> dict[str, Number]:
    r""":math:`\pi_k` the mean over the marginal items of :math:`n_{ik}/n_i`, :math:`p_e = \sum_k \pi_k^2`."""
    items = _marginal_items(X, marginals)
    p_o = percent_agreement(X, categories)["p_o"]
    if not _pairable(X):
        return {"value": NAN, "p_o": NAN, "p_e": NAN}
    p_e = Fraction(0)
    for c in (exact(c) for c in categories):
        pi = sum((Fraction(sum(v == c for _, v in item), len(item)) for item in items), Fraction(0))
        pi /= len(items)
        p_e += pi * pi
    return {"value": chance_corrected(p_o, p_e), "p_o": p_o, "p_e": p_e}


def gwet_ac(X: Any, categories: Sequence[float], level: str = "nominal",
            weights: str = "identity", marginals: str = "all_rated_items") -> dict[str, Number]:
    r"""Gwet's AC1 (identity weights; Gwet 2008) / AC2 (weighted; Gwet 2014).

    .. math:: \pi_k = \frac{1}{n} \sum_{i \in M} \frac{n_{ik}}{n_i}, \qquad
              p_e = \frac{T_w}{q(q-1)} \sum_k \pi_k (1 - \pi_k), \qquad T_w = \sum_{k,l} w_{kl}

    over the ``n`` marginal items ``M``: every rated item (Gwet 2014; irrCAC ``gwet``), or the pairable ones.
    """
    items = _marginal_items(X, marginals)
    p_o = percent_agreement(X, categories, level, weights)["p_o"]
    q = len(categories)
    if not _pairable(X) or q < 2:
        return {"value": NAN, "p_o": p_o, "p_e": NAN}
    chance = Fraction(0)
    for c in (exact(c) for c in categories):
        pi = Fraction(0)
        for item in items:
            pi += Fraction(sum(v == c for _, v in item), len(item))
        pi /= len(items)
        chance += pi * (1 - pi)
    p_e = weight_total(categories, level, weights) / (q * (q - 1)) * chance
    return {"value": chance_corrected(p_o, p_e), "p_o": p_o, "p_e": p_e}


def specific_agreement(X: Any, categories: Sequence[float]) -> dict[float, Number]:
    r"""Category-specific agreement (Dice 1945; Girard's ``mSPECIFIC``).

    :math:`SA_k` = (ordered pairs of distinct ratings of one item that are both ``k``) /
    (ordered pairs whose first rating is ``k``) = :math:`\sum_i n_{ik}(n_{ik}-1) / \sum_i n_{ik}(n_i-1)`.
    """
    out: dict[float, Number] = {}
    items = item_ratings(X)
    for c in categories:
        k = exact(c)
        agree = possible = 0
        for item in items:
            for a, (_, va) in enumerate(item):
                for b, (_, vb) in enumerate(item):
                    if a != b and va == k:
                        possible += 1
                        agree += vb == k
        out[c] = Fraction(agree, possible) if possible else NAN
    return out


# ------------------------------------------------------------------------------- Krippendorff alpha


def _ordinal_metric(freq: dict[Fraction, Fraction], cats: list[Fraction]) -> dict[tuple[Fraction, Fraction],
                                                                                Fraction]:
    """Krippendorff's ordinal metric :math:`(\\sum_{g=c}^{k} n_g - (n_c + n_k)/2)^2` over ordered categories."""
    delta = {}
    for i, c in enumerate(cats):
        for j, k in enumerate(cats):
            lo, hi = min(i, j), max(i, j)
            between = sum((freq[cats[g]] for g in range(lo, hi + 1)), Fraction(0))
            delta[c, k] = (between - (freq[c] + freq[k]) / 2) ** 2
    return delta


def krippendorff_alpha(X: Any, categories: Sequence[float], level: str = "nominal") -> dict[str, Number]:
    r"""Krippendorff's alpha by enumerating pairs of pairable values (Krippendorff 2004, ch. 11;
    "Computing Krippendorff's alpha-reliability", 2011).

    Coincidences: every ordered pair of distinct values ``(a, b)`` within a unit with
    :math:`m_u \ge 2` values adds :math:`1/(m_u - 1)` to :math:`o_{ab}`; :math:`n_c = \sum_k o_{ck}`,
    :math:`n = \sum_c n_c`.

    .. math::

        D_o = \frac{1}{n} \sum_{c,k} o_{ck}\, \delta_{ck}, \qquad
        D_e = \frac{1}{n(n-1)} \sum_{a \ne b} \delta(v_a, v_b), \qquad \alpha = 1 - D_o / D_e,

    the second sum running over all ordered pairs of distinct pairable values of the whole data.
    Metrics: nominal ``1[c != k]``; ordinal :math:`(\sum_{g=c}^{k} n_g - (n_c+n_k)/2)^2`; interval
    :math:`(c-k)^2`; ratio :math:`((c-k)/(c+k))^2` (0 when ``c + k = 0``).
    """
    cats = [exact(c) for c in categories]
    coincidence = {(c, k): Fraction(0) for c in cats for k in cats}
    pairable_values: list[Fraction] = []
    for item in _pairable(X):
        m = len(item)
        values = [v for _, v in item]
        pairable_values.extend(values)
        for a in range(m):
            for b in range(m):
                if a != b:
                    coincidence[values[a], values[b]] += Fraction(1, m - 1)
    freq = {c: sum((coincidence[c, k] for k in cats), Fraction(0)) for c in cats}
    n = sum(freq.values(), Fraction(0))
    if n == 0:
        return {"value": NAN, "d_o": NAN, "d_e": NAN}
    if level == "nominal":
        def delta(c: Fraction, k: Fraction) -> Fraction:
            return Fraction(int(c != k))
    elif level == "ordinal":
        table = _ordinal_metric(freq, cats)

        def delta(c: Fraction, k: Fraction) -> Fraction:
            return table[c, k]
    elif level == "interval":
        def delta(c: Fraction, k: Fraction) -> Fraction:
            return (c - k) ** 2
    elif level == "ratio":
        def delta(c: Fraction, k: Fraction) -> Fraction:
            return ((c - k) / (c + k)) ** 2 if c + k != 0 else Fraction(0)
    else:
        raise ValueError(level)
    d_o = sum((coincidence[c, k] * delta(c, k) for c in cats for k in cats), Fraction(0)) / n
    between = Fraction(0)
    for a, va in enumerate(pairable_values):
        for b, vb in enumerate(pairable_values):
            if a != b:
                between += delta(va, vb)
    d_e = between / (n * (n - 1))
    return {"value": one_minus_ratio(d_o, d_e), "d_o": d_o, "d_e": d_e}


# ----------------------------------------------------------------------------- Janson-Olsson iota


def _distance(name: str, pos: dict[Fraction, Fraction]) -> Any:
    """xRR paper eq. 3 (squared difference of positions) or eq. 4 (nominal)."""
    if name == "interval":
        return lambda a, b: (pos[a] - pos[b]) ** 2
    if name == "nominal":
        return lambda a, b: Fraction(int(a != b))
    raise ValueError(name)


def janson_olsson_iota(X: Any, categories: Sequence[float], level: str = "interval",
                       distance: str = "interval") -> dict[str, Number]:
    r"""Janson & Olsson's iota on *complete* data, xRR paper (Wong et al. 2021) eq. 1-5.

    ``X`` is ``n`` items x ``b`` raters with no missing value; ``x_ri`` is rater ``r``'s rating of item ``i``.

    .. math::

        d_o = \Big[n \binom{b}{2}\Big]^{-1} \sum_{r<s} \sum_i D(x_{ri}, x_{si})          \quad (2)

        d_e = \Big[n^2 \binom{b}{2}\Big]^{-1} \sum_{r<s} \sum_i \sum_j D(x_{ri}, x_{sj}) \quad (5)

        \iota = 1 - d_o / d_e                                                           \quad (1)

    with :math:`D` the squared difference (eq. 3) or the nominal indicator (eq. 4).
    """
    M = np.asarray(X, dtype=float)
    if np.isnan(M).any():
        raise ValueError("eq. 1-5 are defined on complete data")
    n, b = M.shape
    D = _distance(distance, positions(categories, level))
    x = [[exact(M[i, r]) for i in range(n)] for r in range(b)]  # x[r][i]
    pairs = math.comb(b, 2)
    d_o = Fraction(0)
    d_e = Fraction(0)
    for r in range(b):
        for s in range(r + 1, b):
            for i in range(n):
                d_o += D(x[r][i], x[s][i])
                for j in range(n):
                    d_e += D(x[r][i], x[s][j])
    d_o /= n * pairs
    d_e /= n * n * pairs
    return {"value": one_minus_ratio(d_o, d_e), "d_o": d_o, "d_e": d_e}


def janson_olsson_iota_missing(X: Any, categories: Sequence[float], level: str = "interval",
                               distance: str = "interval") -> dict[str, Number]:
    r"""The core's documented extension of eq. 1-5 to missing data (not printed in the paper).

    :math:`d_o`: mean over pairable items of the mean of ``D`` over the item's ordered pairs of
    distinct ratings. :math:`d_e`: mean over ordered pairs of distinct raters ``(g, h)`` (raters with a
    rating on a pairable item) of the mean of ``D`` over all (rating of ``g``, rating of ``h``) on
    pairable items. On complete data these are eq. 2 and eq. 5.
    """
    D = _distance(distance, positions(categories, level))
    pairable = _pairable(X)
    if not pairable:
        return {"value": NAN, "d_o": NAN, "d_e": NAN}
    d_o = Fraction(0)
    for item in pairable:
        m = len(item)
        d_o += sum((D(item[a][1], item[b][1]) for a in range(m) for b in range(m) if a != b),
                   Fraction(0)) / (m * (m - 1))
    d_o /= len(pairable)
    own: dict[int, list[Fraction]] = {}
    for item in pairable:
        for rater, value in item:
            own.setdefault(rater, []).append(value)
    raters = sorted(own)
    if len(raters) < 2:
        return {"value": NAN, "d_o": d_o, "d_e": NAN}
    d_e = Fraction(0)
    for g in raters:
        for h in raters:
            if g != h:
                d_e += sum((D(u, v) for u in own[g] for v in own[h]), Fraction(0)) / (len(own[g]) * len(own[h]))
    d_e /= len(raters) * (len(raters) - 1)
    return {"value": one_minus_ratio(d_o, d_e), "d_o": d_o, "d_e": d_e}


# ------------------------------------------------------------------------------------ kappa_x


def cross_kappa(X: Any, Y: Any, categories: Sequence[float], level: str = "nominal",
                distance: str | Sequence[Sequence[float]] = "nominal") -> dict[str, Number]:
    r"""Cross-replication kappa :math:`\kappa_x(X, Y)` with missing data, xRR paper eq. 9-11.

    ``X`` and ``Y`` have the same rows (items); only items with a rating in both are used.

    .. math::

        d_o = \sum_i \frac{R(i)+S(i)}{\mathbf R + \mathbf S} \sum_{r=1}^{R(i)} \sum_{s=1}^{S(i)}
              \frac{D(x_{ri}, y_{si})}{R(i) S(i)}                                          \quad (9)

        d_e = \frac{1}{\mathbf R \mathbf S} \sum_i \sum_j \sum_{r=1}^{R(i)} \sum_{s=1}^{S(j)}
              D(x_{ri}, y_{sj})                                                             \quad (10)

        \mathbf R = \sum_i R(i), \ \mathbf S = \sum_j S(j)                                 \quad (11)

    ``distance``: "nominal" (eq. 4), "interval" (eq. 3, squared difference of positions), "ordinal"
    (Krippendorff's ordinal metric from the category frequencies of both replications on the common
    items; the core's documented choice) or a (q, q) matrix indexed by category positions.
    """
    xs, ys = item_ratings(X), item_ratings(Y)
    common = [i for i in range(len(xs)) if xs[i] and ys[i]]
    if not common:
        raise ValueError("no common item")
    cats = [exact(c) for c in categories]
    pos = positions(categories, level)
    if isinstance(distance, str) and distance == "ordinal":
        freq = {c: Fraction(sum(v == c for i in common for _, v in xs[i] + ys[i])) for c in cats}
        table = _ordinal_metric(freq, cats)

        def dist(a: Fraction, b: Fraction) -> Fraction:
            return table[a, b]
    elif isinstance(distance, str):
        dist = _distance(distance, pos)
    else:
        index = {c: k for k, c in enumerate(cats)}

        def dist(a: Fraction, b: Fraction) -> Fraction:
            return exact(distance[index[a]][index[b]])
    R = sum(len(xs[i]) for i in common)
    S = sum(len(ys[j]) for j in common)
    d_o = Fraction(0)
    for i in common:
        Ri, Si = len(xs[i]), len(ys[i])
        inner = Fraction(0)
        for _, x in xs[i]:
            for _, y in ys[i]:
                inner += dist(x, y) / (Ri * Si)
        d_o += Fraction(Ri + Si, R + S) * inner
    d_e = Fraction(0)
    for i in common:
        for j in common:
            for _, x in xs[i]:
                for _, y in ys[j]:
                    d_e += dist(x, y)
    d_e /= R * S
    return {"value": one_minus_ratio(d_o, d_e), "d_o": d_o, "d_e": d_e, "n_common": len(common)}


# ---------------------------------------------------------------------------------------- SPA


@cache
def _agreement_moments(n: int, p: tuple[Number, ...]) -> tuple[Number, Number]:
    """(E[P], E[P^2]) of one item's agreement, enumerating all ``C**n`` labelings."""
    C = len(p)
    first: Number = 0 * p[0]
    second: Number = 0 * p[0]
    for labeling in itertools.product(range(C), repeat=n):
        probability: Number = 1 + 0 * p[0]
        for label in labeling:
            probability *= p[label]
        if probability == 0:
            continue
        counts = [labeling.count(c) for c in range(C)]
        agreement = Fraction(sum(m * (m - 1) for m in counts), n * (n - 1))
        if isinstance(probability, float):
            agreement = float(agreement)  # type: ignore[assignment]
        first += probability * agreement
        second += probability * agreement * agreement
    return first, second


def agreement_variance_enum(n: int, p: Sequence[Number]) -> Number:
    r"""var[P_hat] for ``n`` labels drawn i.i.d. from ``p``, by enumerating every labeling.

    Each of the ``C**n`` labelings (itertools.product) has probability :math:`\prod_a p_{\ell_a}`
    (together: the multinomial law of the counts) and agreement
    :math:`\hat P = \sum_c n_c(n_c-1) / (n(n-1))` (SPA paper eq. 7 / 9);
    :math:`\mathrm{var} = E[\hat P^2] - E[\hat P]^2`. This is what the paper's eq. 20-23 and
    appendix A/B try to express in closed form (the printed equations contain typos). Infinite for
    ``n < 2`` (§5.5).
    """
    if n < 2:
        return math.inf
    first, second = _agreement_moments(n, tuple(p))
    return second - first * first


def spa(X: Any, categories: Sequence[float], weighting: str = "annotations_m1") -> dict[str, Number]:
    r"""Sparse probability of agreement, SPA paper eq. 7, with the item weights of §5.

    :math:`\hat P_i` = agreeing edges / possible edges of item ``i`` (eq. 9, by counting pairs);
    :math:`\bar P_{spa} = \sum_i k_i \hat P_i / \sum_i k_i`.

    Weights (§5.1-5.5): flat 1; annotations :math:`n_i`; annotations_m1 :math:`n_i - 1`; edges
    :math:`n_i(n_i-1)/2`; inv_var :math:`1/\mathrm{var}[\hat P \mid n_i]` under the uniform
    distribution over the ``q`` categories; inv_var_class the same under the class distribution of
    the annotations on pairable items (the core's documented estimate of ``p``). Items with one
    annotation get weight 0. When ``p`` puts all mass on one class every variance is 0; every
    pairable item then agrees surely and we use weight 1 (any common weight gives the same SPA).
    """
    items = item_ratings(X)
    q = len(categories)
    pairable = [item for item in items if len(item) >= 2]
    if not pairable:
        return {"value": NAN}
    cats = [exact(c) for c in categories]
    if weighting == "inv_var":
        p: tuple[float, ...] | None = tuple([1.0 / q] * q)
    elif weighting == "inv_var_class":
        total = sum(len(item) for item in pairable)
        p = tuple(float(Fraction(sum(v == c for item in pairable for _, v in item), total)) for c in cats)
    else:
        p = None
    num: Number = 0
    den: Number = 0
    for item in items:
        n_i = len(item)
        if n_i < 2:
            continue  # weight 0 (§5.5)
        edges = sum(item[a][1] == item[b][1] for a in range(n_i) for b in range(a + 1, n_i))
        P_i = Fraction(edges, n_i * (n_i - 1) // 2)
        if weighting == "flat":
            k: Number = Fraction(1)
        elif weighting == "annotations":
            k = Fraction(n_i)
        elif weighting == "annotations_m1":
            k = Fraction(n_i - 1)
        elif weighting == "edges":
            k = Fraction(n_i * (n_i - 1), 2)
        elif weighting in ("inv_var", "inv_var_class"):
            var = agreement_variance_enum(n_i, p)  # type: ignore[arg-type]
            k = 1.0 / var if var > 0 else 1.0
            P_i = float(P_i)  # type: ignore[assignment]
        else:
            raise ValueError(weighting)
        num += k * P_i
        den += k
    return {"value": num / den}


# --------------------------------------------------------------------------------- random data


def random_wide(rng: np.random.Generator, *, level: str = "nominal", n_items: tuple[int, int] = (2, 12),
                n_raters: tuple[int, int] = (2, 6), n_categories: tuple[int, int] = (2, 5),
                missing: float | None = None, singles: bool = True, unused: bool = True,
                complete: bool = False, categories: Sequence[float] | None = None,
                ) -> tuple[np.ndarray, list[float]]:
    """A small random wide design (items x raters, nan missing) and its explicit category list.

    Ratings copy an item's latent category with a random probability (so agreement is neither 0
    nor 1), categories can be unused, cells are missing at random, and some items are cut down to a
    single rating. Category values: distinct integers 0..9 for nominal/ordinal (not consecutive, so
    ranks and values differ), halves in [-3, 9] for interval, halves in [0, 9] for ratio.
    """
    n = int(rng.integers(n_items[0], n_items[1] + 1))
    b = int(rng.integers(n_raters[0], n_raters[1] + 1))
    if categories is None:
        q = int(rng.integers(n_categories[0], n_categories[1] + 1))
        pool = {"interval": np.arange(-6, 19) / 2, "ratio": np.arange(0, 19) / 2}.get(level, np.arange(10.0))
        categories = sorted(float(c) for c in rng.choice(pool, size=q, replace=False))
    cats = [float(c) for c in categories]
    q = len(cats)
    used = cats
    if unused and q > 2 and rng.random() < 0.4:
        used = list(rng.choice(cats, size=int(rng.integers(2, q)), replace=False))
    prevalence = rng.dirichlet(np.full(len(used), float(rng.choice([0.5, 1.0, 5.0]))))
    fidelity = rng.uniform(0.0, 1.0)
    X = np.empty((n, b))
    for i in range(n):
        latent = rng.choice(used, p=prevalence)
        for r in range(b):
            X[i, r] = latent if rng.random() < fidelity else rng.choice(used, p=prevalence)
    if not complete:
        rate = rng.uniform(0.0, 0.5) if missing is None else missing
        X[rng.random((n, b)) < rate] = np.nan
        if singles:
            for i in range(n):
                if rng.random() < 0.15:
                    keep = rng.integers(b)
                    X[i, np.arange(b) != keep] = np.nan
        if np.isnan(X).all():
            X[0, 0] = used[0]
    return X, cats


#: The fields of a standard error in ``Estimate.to_dict()``: a standard error that reads each judgement (Conger's
#: analytic one, the bootstrap's) is not computed from sums aggregated in a database, which say why in ``se_note``.
SE_FIELDS = ("se", "se_method", "z", "p_value", "se_note", "se_source", "se_null", "test_source", "se_n_boot")


def without_standard_error(found: Any) -> Any:
    """``found`` (an ``Estimate.to_dict()``, nested) without its standard-error fields, checking on the way that
    each estimate has either a standard error with its method or the reason it has none."""
    if not isinstance(found, dict):
        return found
    details = found.get("details")
    if isinstance(details, dict) and ("se_method" in found) and "se_note" in details:
        assert found["se_method"] is None, found
    return {k: without_standard_error(v) for k, v in found.items() if k not in SE_FIELDS}
