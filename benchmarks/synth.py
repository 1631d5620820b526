"""Seeded generators of crowd-labelling data for the benchmarks and the coverage study.

Two generators:

* :func:`crowd` -- a *realistic* sparse crowd: string item and rater ids,
  ``q`` ordered categories ``1..q`` with an imbalanced class prior, item
  difficulty, rater accuracy and rater bias, a skewed rater activity
  (a few raters do most of the work), 2-4 distinct raters per item, and
  optionally a second replication of the same items by another pool of raters.
  It is used for timing and memory; its population agreement has no closed form.
* :func:`exchangeable` -- a process with *known* population values: the true
  class of an item is drawn from ``prior``, every rating of replication X
  (resp. Y) is drawn independently from the row ``confusion_x[t]``
  (resp. ``confusion_y[t]``). :func:`population_values` gives the limits of
  Krippendorff's alpha, Fleiss' kappa, SPA, kappa_x and normalized kappa_x
  for that process in closed form (see ``docs/benchmarks.md``).

Both return a long pandas DataFrame ``item_id, rater_id, label, pool``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

DEFAULT_PRIOR = (0.40, 0.25, 0.15, 0.12, 0.08)


# ------------------------------------------------------------------ realistic crowd
def crowd(n_judgements: int = 1_000_000, *, n_raters: int = 10_000, q: int = 5, min_per_item: int = 2,
          max_per_item: int = 4, replications: int = 1, seed: int = 0, overlap: float = 1.0,
          ) -> pd.DataFrame:
    """A realistic sparse crowd in long format.

    Parameters
    ----------
    n_judgements : int, default 1_000_000
        Approximate number of judgements *per replication* (the number of items
        is ``n_judgements / mean(ratings per item)``).
    n_raters : int, default 10_000
        Raters per replication (ids ``"w00042"`` in replication 1, ``"v00042"``
        in replication 2: the pools are disjoint).
    q : int, default 5
        Number of ordered categories; labels are the integers ``1..q``.
    min_per_item, max_per_item : int, default 2, 4
        Each item gets a uniform number of distinct raters in this range.
    replications : {1, 2}, default 1
        With 2, a second pool (``pool == "B"``) labels a fraction ``overlap``
        of the same items with the same process and fresh raters.
    seed : int, default 0
        Everything is reproducible from it.
    overlap : float, default 1.0
        Share of items the second replication also labels.

    Returns
    -------
    pandas.DataFrame
        Columns ``item_id`` (str), ``rater_id`` (str), ``label`` (int64 in
        ``1..q``), ``pool`` (``"A"`` / ``"B"``), rows shuffled.
    """
    rng = np.random.default_rng(seed)
    mean_k = (min_per_item + max_per_item) / 2.0
    n_items = max(1, round(n_judgements / mean_k))
    prior = _prior(q)
    truth = rng.choice(q, size=n_items, p=prior)
    difficulty = rng.beta(2.0, 5.0, size=n_items)
    item_ids = _ids("i", n_items, rng)
    frames = [_replication(rng, truth, difficulty, item_ids, np.arange(n_items), n_raters, q,
                           min_per_item, max_per_item, "w", "A")]
    if replications >= 2:
        chosen = np.sort(rng.choice(n_items, size=max(1, round(overlap * n_items)), replace=False))
        frames.append(_replication(rng, truth, difficulty, item_ids, chosen, n_raters, q,
                                   min_per_item, max_per_item, "v", "B"))
    data = pd.concat(frames, ignore_index=True)
    return data.iloc[rng.permutation(len(data))].reset_index(drop=True)


def _prior(q: int) -> np.ndarray:
    if q == len(DEFAULT_PRIOR):
        return np.asarray(DEFAULT_PRIOR)
    weights = 0.7 ** np.arange(q)
    return weights / weights.sum()


def _ids(prefix: str, n: int, rng: np.random.Generator) -> np.ndarray:
    # Random-looking but unique string ids: ids are not sorted like the codes.
    width = len(str(10 * n))
    numbers = rng.choice(10 * n, size=n, replace=False)
    return np.asarray([f"{prefix}{k:0{width}d}" for k in numbers.tolist()], dtype=object)


def _replication(rng: np.random.Generator, truth: np.ndarray, difficulty: np.ndarray, item_ids: np.ndarray,
                 items: np.ndarray, n_raters: int, q: int, lo: int, hi: int, prefix: str, pool: str,
                 ) -> pd.DataFrame:
    accuracy = rng.beta(8.0, 2.0, size=n_raters)
    bias = rng.dirichlet(np.full(q, 2.0), size=n_raters)
    activity = rng.lognormal(0.0, 1.2, size=n_raters)
    activity /= activity.sum()
    per_item = rng.integers(lo, hi + 1, size=items.size)
    raters = _distinct_raters(rng, activity, items.size, hi)
    keep = np.arange(hi)[None, :] < per_item[:, None]
    item_pos = np.repeat(items, per_item)
    rater = raters[keep]
    labels = _labels(rng, truth[item_pos], difficulty[item_pos], accuracy[rater], bias[rater], q)
    rater_ids = np.asarray([f"{prefix}{k:05d}" for k in range(n_raters)], dtype=object)
    return pd.DataFrame({"item_id": item_ids[item_pos], "rater_id": rater_ids[rater],
                         "label": labels + 1, "pool": pool})


def _distinct_raters(rng: np.random.Generator, activity: np.ndarray, n_items: int, k: int) -> np.ndarray:
    """(n_items, k) rater codes drawn by activity, distinct within each row."""
    raters = rng.choice(activity.size, size=(n_items, k), p=activity)
    while True:
        ordered = np.sort(raters, axis=1)
        dup_rows = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        if dup_rows.size == 0:
            return raters
        raters[dup_rows] = rng.choice(activity.size, size=(dup_rows.size, k), p=activity)


def _labels(rng: np.random.Generator, truth: np.ndarray, difficulty: np.ndarray, accuracy: np.ndarray,
            bias: np.ndarray, q: int) -> np.ndarray:
    """True class w.p. accuracy*(1-difficulty); else a neighbour (ordinal slip) or the rater's bias."""
    correct = rng.random(truth.size) < accuracy * (1.0 - difficulty)
    slip = rng.random(truth.size) < 0.5
    neighbour = np.clip(truth + rng.choice([-1, 1], size=truth.size), 0, q - 1)
    cumulative = np.cumsum(bias, axis=1)
    biased = (rng.random(truth.size)[:, None] > cumulative).sum(axis=1).clip(0, q - 1)
    return np.where(correct, truth, np.where(slip, neighbour, biased)).astype(np.int64)


# ------------------------------------------------------- process with known population values
@dataclass(frozen=True)
class Process:
    """Exchangeable-rater process: true class ~ prior; each label ~ confusion[true class].

    ``confusion_x`` / ``confusion_y`` are (q, q) row-stochastic matrices of the
    two replications; ``per_item_x`` / ``per_item_y`` the (inclusive) ranges of
    the number of ratings per item, drawn uniformly and independently of the labels.
    """

    prior: np.ndarray
    confusion_x: np.ndarray
    confusion_y: np.ndarray
    per_item_x: tuple[int, int] = (2, 4)
    per_item_y: tuple[int, int] = (2, 3)
    n_raters: int = 40

    @property
    def q(self) -> int:
        return int(self.prior.size)


def default_process(q: int = 4) -> Process:
    """A moderately reliable crowd (X) and a more reliable trusted pool (Y), imbalanced classes."""
    prior = _prior(q)
    return Process(prior=prior, confusion_x=_confusion(q, 0.70), confusion_y=_confusion(q, 0.85))


def _confusion(q: int, accuracy: float) -> np.ndarray:
    """Correct w.p. ``accuracy``; errors go to neighbours twice as often as to far categories."""
    idx = np.arange(q)
    weight = np.where(np.abs(idx[:, None] - idx[None, :]) == 1, 2.0, 1.0)
    np.fill_diagonal(weight, 0.0)
    off = weight / weight.sum(axis=1, keepdims=True) * (1.0 - accuracy)
    return off + np.eye(q) * accuracy


def exchangeable(process: Process, n_items: int, *, seed: int | np.random.Generator = 0) -> pd.DataFrame:
    """Two replications (pools ``"X"`` and ``"Y"``) of ``n_items`` items from ``process``.

    Raters are drawn uniformly and distinctly within an item from a pool of
    ``process.n_raters`` raters per replication; since labels do not depend on
    the rater, the population values are those of :func:`population_values`.
    """
    rng = np.random.default_rng(seed)
    truth = rng.choice(process.q, size=n_items, p=process.prior)
    frames = []
    for pool, confusion, (lo, hi) in (("X", process.confusion_x, process.per_item_x),
                                      ("Y", process.confusion_y, process.per_item_y)):
        per_item = rng.integers(lo, hi + 1, size=n_items)
        items = np.repeat(np.arange(n_items), per_item)
        cumulative = np.cumsum(confusion, axis=1)[truth[items]]
        labels = (rng.random(items.size)[:, None] > cumulative).sum(axis=1).clip(0, process.q - 1)
        # Distinct raters per item: a random offset and consecutive raters (mod pool size).
        start = rng.integers(0, process.n_raters, size=n_items)
        rank = np.arange(items.size) - np.repeat(np.cumsum(per_item) - per_item, per_item)
        raters = (start[items] + rank) % process.n_raters
        frames.append(pd.DataFrame({"item_id": items, "rater_id": [f"{pool}{r}" for r in raters.tolist()],
                                    "label": labels + 1, "pool": pool}))
    return pd.concat(frames, ignore_index=True)


def population_values(process: Process) -> dict[str, float]:
    r"""Closed-form population values of the exchangeable process (nominal distance).

    With :math:`A_X = \sum_t \pi_t \sum_c M_X[t, c]^2` (two ratings of one
    item agree), :math:`p^X = \pi^\top M_X` (marginal label distribution) and
    :math:`B = \sum_t \pi_t \sum_c M_X[t, c] M_Y[t, c]`:

    * Fleiss' kappa, Krippendorff's alpha (nominal) and Conger's kappa all tend
      to :math:`(A_X - \lVert p^X \rVert^2) / (1 - \lVert p^X \rVert^2)`
      (the number of ratings per item is independent of the labels, and every
      rater's marginal tends to :math:`p^X`),
    * Gwet's AC1 to :math:`(A_X - e) / (1 - e)` with
      :math:`e = \sum_c p^X_c (1 - p^X_c) / (q - 1)`,
    * SPA (any weighting that depends on :math:`n_i` only) tends to :math:`A_X`,
    * kappa_x tends to :math:`1 - (1 - B) / (1 - p^{X\top} p^Y)`,
    * normalized kappa_x to :math:`\kappa_x / \sqrt{\alpha_X \alpha_Y}`.
    """
    pi, mx, my = process.prior, process.confusion_x, process.confusion_y
    px, py = pi @ mx, pi @ my
    a_x = float(pi @ (mx**2).sum(axis=1))
    a_y = float(pi @ (my**2).sum(axis=1))
    b = float(pi @ (mx * my).sum(axis=1))
    kappa_x_irr = (a_x - px @ px) / (1.0 - px @ px)
    kappa_y_irr = (a_y - py @ py) / (1.0 - py @ py)
    cross = 1.0 - (1.0 - b) / (1.0 - px @ py)
    chance_ac1 = float(px @ (1.0 - px)) / (process.q - 1)
    return {"krippendorff_alpha": float(kappa_x_irr), "fleiss_kappa": float(kappa_x_irr),
            "conger_kappa": float(kappa_x_irr), "gwet_ac": (a_x - chance_ac1) / (1.0 - chance_ac1),
            "spa": a_x, "cross_kappa": float(cross),
            "normalized_cross_kappa": float(cross / np.sqrt(kappa_x_irr * kappa_y_irr)),
            "alpha_y": float(kappa_y_irr)}
