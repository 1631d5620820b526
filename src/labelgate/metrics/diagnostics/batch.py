r"""The diagnostics of a whole batch: :func:`rater_diagnostics` and the :func:`design_summary` of a pool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from labelgate.core.ratings import Ratings, common_categories
from labelgate.errors import ParameterError
from labelgate.metrics.diagnostics.blocks import Kind, MatrixKind, distance_kind
from labelgate.metrics.diagnostics.pairs import PairTable, collusion_partners
from labelgate.metrics.diagnostics.rows import rater_rows_from_sums
from labelgate.metrics.diagnostics.sums import RaterSums, rater_sums


def rater_diagnostics(pool: Ratings, trusted: Ratings | None = None, *, pool_name: str = "crowd",
                      ci: float | None = 0.95, min_agreement: float = 0.2, min_shared_items: int = 10,
                      effect: float = 0.2, fdr: float = 0.1, power: float = 0.8, collusion_margin: float = 0.3,
                      min_pair_items: int = 20, center: float | None = None) -> list[dict[str, Any]]:
    r"""One row per rater of ``pool``: agreement with the trusted pool and co-raters, volume, bias, flags.

    Parameters
    ----------
    pool : Ratings
        The raters to diagnose (e.g. the crowd).
    trusted : Ratings, optional
        The trusted replication of (some of) the same items; items are matched by id. Without it the
        trusted fields are None and raters are judged on their co-raters.
    pool_name : str, default "crowd"
        Written in the ``pool`` field.
    ci : float or None, default 0.95
        Interval level (None: no interval, no test, no ``low_agreement`` flag).
    min_agreement : float, default 0.2
        The kappa a rater must reach: ``low_agreement`` when the one-sided test of
        :math:`H_0: \kappa \ge` ``min_agreement`` is rejected by Benjamini-Hochberg across the raters.
    min_shared_items : int, default 10
        Trusted items a rater needs to be tested on its trusted kappa (else on the leave-one-out one,
        if it has that many co-rated items; else not tested). Also the least workload reported.
    effect : float, default 0.2
        The workload (``needs_items``) is what the test needs to flag a rater whose true kappa is
        ``min_agreement - effect`` with probability ``power`` (the defaults: a rater at chance, a spammer).
    fdr : float, default 0.1
        False discovery rate of the ``low_agreement`` flags (Benjamini-Hochberg).
    power : float, default 0.8
        Power of the workload.
    collusion_margin : float, default 0.3
        See :func:`evaluate_pairs`.
    min_pair_items : int, default 20
        Co-rated items a pair needs before it can be flagged.
    center : float, optional
        Centre of the values for moment sums (interval/ratio); default the first value.

    Returns
    -------
    list of dict
        Keys ``rater_id, pool, n_ratings, n_shared_items, kappa_vs_trusted, kappa_ci_low, kappa_ci_high,
        loo_agreement, bias, flags, partners`` (the report contract) and ``loo_ci_low, loo_ci_high,
        n_loo_items, agreement_basis`` ("trusted" | "peers" | None), ``p_value`` (of the basis), ``judged``,
        ``needs_items``, ``flag_level`` and ``workload`` (see :func:`judge_rows`). NaN is None.

    Notes
    -----
    Cost :math:`O(N + \sum_i n_i^2)`: one row per judgement and the co-rating pairs that exist. Intervals
    are score (Wilson) intervals from the same additive sums the monitor maintains; see
    :mod:`labelgate.metrics.diagnostics.judging` for the formulas and their references.

    Examples
    --------
    >>> import labelgate as lg
    >>> crowd = lg.Ratings.from_long({"item_id": [1, 1, 2, 2, 3, 3], "rater_id": list("ababab"),
    ...                               "label": list("xxyyxy")})
    >>> trusted = lg.Ratings.from_long({"item_id": [1, 2, 3], "rater_id": list("ttt"), "label": list("xyx")})
    >>> rows = rater_diagnostics(crowd, trusted, ci=None)
    >>> [(r["rater_id"], r["kappa_vs_trusted"], r["n_shared_items"]) for r in rows]
    [('a', 1.0, 3), ('b', 0.4, 3)]
    """
    if trusted is not None:
        pool, trusted = common_categories(pool, trusted)
    sums, pairs = rater_sums(pool, trusted, center=center)
    return diagnostics_from_sums([_plain(x) for x in pool.rater_labels], sums, pairs, level=pool.level,
                                 q=pool.n_categories, distance=getattr(pool, "set_distances", None),
                                 pool_name=pool_name, ci=ci, min_agreement=min_agreement,
                                 min_shared_items=min_shared_items, effect=effect, fdr=fdr, power=power,
                                 collusion_margin=collusion_margin, min_pair_items=min_pair_items)


def diagnostics_from_sums(rater_ids: Sequence[Any], sums: RaterSums, pairs: PairTable, *, level: str, q: int,
                          pool_name: str = "crowd", ci: float | None = 0.95, min_agreement: float = 0.2,
                          min_shared_items: int = 10, effect: float = 0.2, fdr: float = 0.1, power: float = 0.8,
                          collusion_margin: float = 0.3, min_pair_items: int = 20,
                          distance: np.ndarray | None = None) -> list[dict[str, Any]]:
    """The rows of :func:`rater_diagnostics` from the raters' :class:`RaterSums` and co-rating :class:`PairTable`
    (rater codes = positions in ``rater_ids``), however they were summed: over the judgements in the client, or
    by a database (:func:`labelgate.metrics.diagnostics.sums.context_sums`). Parameters as
    :func:`rater_diagnostics`; ``q`` is the number of categories; ``distance``: the q x q distance matrix of
    label sets (level ``"set"``), with which the sums were made.
    """
    if ci is not None and not (isinstance(ci, (int, float)) and 0 < float(ci) < 1):
        raise ParameterError(f"The 'ci' parameter of rater_diagnostics must be None or a level in (0, 1); "
                             f"got {ci!r}.", parameter="ci", value=ci)
    for name, value in (("fdr", fdr), ("power", power)):
        if not (isinstance(value, (int, float)) and 0 < float(value) < 1):
            raise ParameterError(f"The {name!r} parameter of rater_diagnostics must be in (0, 1); got {value!r}.",
                                 parameter=name, value=value)
    if not (isinstance(min_agreement, (int, float)) and -1 <= float(min_agreement) < 1):
        raise ParameterError(f"The 'min_agreement' parameter of rater_diagnostics must be in [-1, 1); got "
                             f"{min_agreement!r}.", parameter="min_agreement", value=min_agreement)
    if not (isinstance(effect, (int, float)) and 0 < float(effect) <= 2):
        raise ParameterError(f"The 'effect' parameter of rater_diagnostics must be in (0, 2]; got {effect!r}.",
                             parameter="effect", value=effect)
    partners = collusion_partners(pairs, sums.pair_agree, sums.pair_total,
                                  margin=collusion_margin, min_items=min_pair_items)
    named = {g: [rater_ids[h] for h in hs] for g, hs in partners.items()}
    kind = distance_kind(level) if distance is None else cast(Kind, MatrixKind(distance))
    return rater_rows_from_sums(list(rater_ids), sums, kind=kind, q=q, pool_name=pool_name, ci=ci,
                                partners=named, min_agreement=min_agreement, min_shared_items=min_shared_items,
                                effect=effect, fdr=fdr, power=power)


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python scalar (rater ids go into JSON rows)."""
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", 1) == 0 else value


def design_summary(r: Ratings, pool: str) -> dict[str, dict[str, Any]]:
    """Ratings-per-item distribution of a pool: ``{pool: {n_items, n_ratings, ratings_per_item_hist}}``.

    Examples
    --------
    >>> import labelgate as lg
    >>> design_summary(lg.Ratings.from_wide([[1, 1, None], [0, 1, 1]]), "crowd")
    {'crowd': {'n_items': 2, 'n_ratings': 5, 'ratings_per_item_hist': {2: 1, 3: 1}}}
    """
    per_item = r.ratings_per_item[r.ratings_per_item > 0]
    sizes, counts = np.unique(per_item, return_counts=True)
    return {pool: {"n_items": int(per_item.size), "n_ratings": int(r.n_ratings),
                   "ratings_per_item_hist": {int(s): int(c) for s, c in zip(sizes, counts, strict=True)}}}
