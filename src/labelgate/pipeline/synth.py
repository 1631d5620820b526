"""Synthetic replications of a labelling task, for the demo, the tests and the benchmarks.

Model. Item ``i`` has a latent class distribution ``p_i ~ Dirichlet(difficulty · 1)`` (small
``difficulty`` = clear items). Both pools measure the same construct: an honest rater draws from
``p_i`` with probability ``1 - noise`` and guesses uniformly otherwise; a biased rater's draw is tilted
by a personal bias vector. On top of this, the crowd pool can contain

* **spammers**, who always guess uniformly (named ``<pool>-spammerNNNN``);
* **colluders**, a group that rates the same items and copies one shared label per item;
* a **contentment** scenario (xRR paper, Fig. 5): on items whose modal class is in
  ``contentment_categories`` (default: all), the crowd answers from *another* item's distribution, so
  both pools agree internally while kappa_x between them is near 0;
* **drift**: after ``drift_at`` (a share of the collection period) the crowd's noise is multiplied by
  ``drift_noise_factor``.

Every judgement gets a timestamp spread uniformly over the collection period; with ``item_hours`` set, an item is
handed out at a uniform time of the period instead and all its judgements (both pools) fall within ``item_hours``
after it, as on a labelling platform that hands out items a batch at a time (a monitor's window then holds whole
items).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from labelgate.errors import ParameterError


@dataclass(frozen=True)
class PoolSpec:
    """How one pool rates.

    Attributes
    ----------
    name : str
        Pool value written in the ``pool`` column.
    n_raters : int
        Raters in the pool.
    ratings_per_item : tuple of int
        Inclusive range ``(low, high)`` of ratings per item (sparse designs: e.g. ``(2, 4)``).
    noise : float
        Probability that an honest rater guesses uniformly.
    bias : float
        Strength of each rater's personal category bias (0 = none).
    spammers : float
        Share of raters who always guess uniformly.
    colluders : int
        Raters in a colluding group that copies one label per item (0 = none).
    item_share : float
        Share of the items this pool rates (the trusted replication usually covers a subset).
    """

    name: str
    n_raters: int = 50
    ratings_per_item: tuple[int, int] = (3, 3)
    noise: float = 0.2
    bias: float = 0.0
    spammers: float = 0.0
    colluders: int = 0
    item_share: float = 1.0


@dataclass(frozen=True)
class Scenario:
    """A synthetic labelling job: items, categories, pools and what goes wrong.

    Attributes
    ----------
    n_items : int
        Items in the batch.
    categories : sequence
        Category labels.
    difficulty : float
        Dirichlet concentration of the items' class distributions (larger = more ambiguous items).
    pools : tuple of PoolSpec
        The replications; by convention the first is the crowd, the second the trusted pool.
    contentment : bool
        The crowd answers from a different item's distribution on items whose modal class is in
        ``contentment_categories``.
    contentment_categories : sequence or None
        Subset of categories affected by contentment (None = all).
    drift_at : float or None
        Share of the collection period after which the crowd's noise changes.
    drift_noise_factor : float
        Multiplier of the crowd's noise after ``drift_at``.
    questions : sequence of str
        Question names; each gets its own item distributions (a ``question`` column when > 1).
    start, duration_hours : datetime, float
        Collection period for the timestamps.
    item_hours : float or None
        When set, the judgements of an item fall within this many hours after the item's hand-out time (uniform over
        the period); None spreads every judgement over the whole period.
    """

    n_items: int = 1000
    categories: Sequence[Any] = ("neg", "neu", "pos")
    difficulty: float = 0.3
    pools: tuple[PoolSpec, ...] = (
        PoolSpec("crowd", n_raters=200, ratings_per_item=(2, 4), noise=0.1),
        PoolSpec("trusted", n_raters=12, ratings_per_item=(3, 3), noise=0.1, item_share=0.5),
    )
    contentment: bool = False
    contentment_categories: Sequence[Any] | None = None
    drift_at: float | None = None
    drift_noise_factor: float = 3.0
    questions: Sequence[str] = ("label",)
    start: datetime = field(default_factory=lambda: datetime(2026, 1, 5, tzinfo=UTC))
    duration_hours: float = 72.0
    item_hours: float | None = None

    def with_crowd(self, **changes: Any) -> Scenario:
        """A copy whose first (crowd) pool has the given changes."""
        return replace(self, pools=(replace(self.pools[0], **changes), *self.pools[1:]))


def simulate(scenario: Scenario | None = None, seed: int | None = 0) -> pd.DataFrame:
    """Long-format judgements (``item_id, rater_id, label, pool, timestamp[, question]``).

    Examples
    --------
    >>> df = simulate(Scenario(n_items=50), seed=1)
    >>> sorted(df["pool"].unique())
    ['crowd', 'trusted']
    >>> df.groupby(["pool", "item_id", "rater_id"]).size().max()
    np.int64(1)
    """
    scenario = scenario or Scenario()
    _check(scenario)
    rng = np.random.default_rng(seed)
    frames = []
    for question in scenario.questions:
        probs = rng.dirichlet(np.full(len(scenario.categories), scenario.difficulty), size=scenario.n_items)
        # the items' hand-out times (shares of the period), shared by the pools; drawn only when asked, so the
        # scenarios without them keep their draws
        handed_out = None if scenario.item_hours is None else rng.random(scenario.n_items)
        for index, pool in enumerate(scenario.pools):
            frame = _simulate_pool(scenario, pool, probs, rng, is_crowd=index == 0, handed_out=handed_out)
            if len(scenario.questions) > 1:
                frame["question"] = question
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _check(s: Scenario) -> None:
    if s.n_items < 1 or len(s.categories) < 2:
        raise ParameterError("A scenario needs at least one item and two categories.", parameter="n_items")
    if s.item_hours is not None and not 0 < s.item_hours <= s.duration_hours:
        raise ParameterError(f"item_hours must be in (0, duration_hours={s.duration_hours}]; got {s.item_hours}.",
                             parameter="item_hours", value=s.item_hours)
    for pool in s.pools:
        low, high = pool.ratings_per_item
        if not 1 <= low <= high:
            raise ParameterError(f"Pool {pool.name!r}: ratings_per_item must be 1 <= low <= high; got "
                                 f"{pool.ratings_per_item}.", parameter="ratings_per_item")
        if high > pool.n_raters:
            raise ParameterError(f"Pool {pool.name!r}: {high} ratings per item need at least {high} raters; "
                                 f"got {pool.n_raters}.", parameter="n_raters")


def _simulate_pool(s: Scenario, pool: PoolSpec, probs: np.ndarray, rng: np.random.Generator,
                   is_crowd: bool, handed_out: np.ndarray | None = None) -> pd.DataFrame:
    q = len(s.categories)
    items = np.flatnonzero(rng.random(s.n_items) < pool.item_share) if pool.item_share < 1 else np.arange(s.n_items)
    per_item = rng.integers(pool.ratings_per_item[0], pool.ratings_per_item[1] + 1, size=items.size)
    item_of = np.repeat(items, per_item)
    rater_of = _assign_raters(rng, pool.n_raters, per_item)
    when = rng.random(item_of.size)
    if handed_out is not None and s.item_hours is not None:  # within item_hours of the item's hand-out time
        span = s.item_hours / s.duration_hours
        when = handed_out[item_of] * (1.0 - span) + when * span
    dist = probs[item_of]
    if is_crowd and s.contentment:
        dist = _contentment(s, probs, item_of, rng)
    noise = np.full(item_of.size, pool.noise)
    if is_crowd and s.drift_at is not None:
        noise = np.where(when >= s.drift_at, np.minimum(pool.noise * s.drift_noise_factor, 1.0), noise)
    if pool.bias > 0:
        tilt = np.exp(pool.bias * rng.standard_normal((pool.n_raters, q)))[rater_of]
        dist = dist * tilt
        dist = dist / dist.sum(axis=1, keepdims=True)
    labels = (rng.random(item_of.size)[:, None] > np.cumsum(dist, axis=1)).sum(axis=1)
    labels = np.minimum(labels, q - 1)
    guess = rng.random(item_of.size) < noise
    spammer = rng.random(pool.n_raters) < pool.spammers
    guess |= spammer[rater_of]
    labels = np.where(guess, rng.integers(0, q, size=item_of.size), labels)
    rater_names = np.asarray([f"{pool.name}-r{k:04d}" for k in range(pool.n_raters)], dtype=object)
    # spammers are named so (as colluders are): a flag can be checked against who guessed
    rater_names[spammer] = [f"{pool.name}-spammer{k:04d}" for k in np.flatnonzero(spammer)]
    frame = pd.DataFrame({
        "item_id": [f"item-{i:06d}" for i in item_of],
        "rater_id": rater_names[rater_of],
        "label": np.asarray(list(s.categories), dtype=object)[labels],
        "pool": pool.name,
        "timestamp": [s.start + timedelta(hours=float(t) * s.duration_hours) for t in when],
    })
    if pool.colluders:
        frame = _add_colluders(frame, s, pool, items, rng)
    return frame


def _assign_raters(rng: np.random.Generator, n_raters: int, per_item: np.ndarray) -> np.ndarray:
    """Distinct raters within each item, spread over the pool."""
    out = np.empty(int(per_item.sum()), dtype=np.int64)
    for k in np.unique(per_item):
        rows = np.flatnonzero(per_item == k)
        picks = np.argsort(rng.random((rows.size, n_raters)), axis=1)[:, :k] if n_raters <= 64 else \
            distinct_draws(rng, n_raters, rows.size, int(k))
        positions = np.concatenate([[0], np.cumsum(per_item)])[rows]
        out[(positions[:, None] + np.arange(k)).ravel()] = picks.ravel()
    return out


def distinct_draws(rng: np.random.Generator, n: int, rows: int, k: int) -> np.ndarray:
    """``k`` distinct values in ``range(n)`` for each of ``rows`` rows (redraws clashes column by column)."""
    picks = rng.integers(0, n, size=(rows, k))
    for col in range(1, k):
        clash = (picks[:, [col]] == picks[:, :col]).any(axis=1)
        while clash.any():
            picks[clash, col] = rng.integers(0, n, size=int(clash.sum()))
            clash = (picks[:, [col]] == picks[:, :col]).any(axis=1)
    return picks


def _contentment(s: Scenario, probs: np.ndarray, item_of: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    affected = np.ones(s.n_items, dtype=bool)
    if s.contentment_categories is not None:
        codes = [list(s.categories).index(c) for c in s.contentment_categories]
        affected = np.isin(probs.argmax(axis=1), codes)
    other = rng.permutation(s.n_items)
    source = np.where(affected, other, np.arange(s.n_items))
    return probs[source[item_of]]


def _add_colluders(frame: pd.DataFrame, s: Scenario, pool: PoolSpec, items: np.ndarray,
                   rng: np.random.Generator) -> pd.DataFrame:
    """A group of raters who all rate the same items and copy one label per item."""
    chosen = rng.choice(items, size=max(1, items.size // 5), replace=False)
    shared = np.asarray(list(s.categories), dtype=object)[rng.integers(0, len(s.categories), chosen.size)]
    names = [f"{pool.name}-colluder{k:02d}" for k in range(pool.colluders)]
    rows = pd.DataFrame({
        "item_id": np.repeat([f"item-{i:06d}" for i in chosen], pool.colluders),
        "rater_id": np.tile(names, chosen.size),
        "label": np.repeat(shared, pool.colluders),
        "pool": pool.name,
        "timestamp": [s.start + timedelta(hours=float(t) * s.duration_hours)
                      for t in rng.random(chosen.size * pool.colluders)],
    })
    return pd.concat([frame, rows], ignore_index=True)


#: Crowd raters of the spammers scenario: with 1,000 items at 2-4 ratings each, about 150 items per rater, enough for
#: the per-rater test to flag a guessing rater (at 200 raters, 15 items each, every rater has too few items to judge).
SPAMMER_CROWD_RATERS = 20


def scenario_named(name: str, n_items: int | None = None) -> Scenario:
    """Ready-made scenarios used by the demo and the tests, each sized so that it shows what it is named for.

    ``good`` — the crowd is simulated from the trusted pool's process; ``random`` — crowd labels at random;
    ``contentment`` — both pools agree internally but not with each other; ``spammers`` — a fifth of
    a crowd of 20 raters guesses (about 150 items each: the gate flags them ``low_agreement``); ``collusion`` — four
    raters copy one label per item on a fifth of the items (the gate names the pairs ``collusion``); ``drift`` — six
    days of collection, items handed out over the period and rated within 4 hours, the crowd's noise five times as
    high from the fourth day on (a monitor with 6-hour windows sees about 100 items a window and the drop in them).

    ``n_items`` (None: the scenario's own size, 1,000 items; 2,400 for ``drift``) sets the items.
    """
    default = 2400 if name == "drift" else 1000
    base = Scenario(n_items=default if n_items is None else n_items)
    options = {
        "good": base,
        "random": base.with_crowd(noise=1.0),
        "contentment": replace(base, contentment=True),
        "spammers": base.with_crowd(spammers=0.2, n_raters=SPAMMER_CROWD_RATERS),
        "collusion": base.with_crowd(colluders=4),
        "drift": replace(base.with_crowd(n_raters=40), drift_at=0.5, drift_noise_factor=5.0, duration_hours=144.0,
                         item_hours=4.0),
    }
    if name not in options:
        raise ParameterError(f"The 'name' parameter of scenario_named must be one of {sorted(options)}; got {name!r}.",
                             parameter="name", value=name)
    return options[name]


def write_daily_deliveries(data: pd.DataFrame, folder: Path, pool: str = "crowd") -> list[Path]:
    """Write ``pool``'s judgements as one delivery file a day, ``day-1.csv``, ``day-2.csv``, ... in ``folder``.

    Days count from the first judgement's midnight (UTC). Each file's modification time is set to its last
    judgement's time, as if delivered then: a monitor's drop folder reads it at once (``settle_seconds`` looks at
    that time), and ``cp -p`` keeps it.

    Examples
    --------
    >>> import tempfile
    >>> data = simulate(Scenario(n_items=40, duration_hours=48.0), seed=1)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     [p.name for p in write_daily_deliveries(data, Path(folder))]
    ['day-1.csv', 'day-2.csv']
    """
    rows = data[data["pool"] == pool]
    stamps = pd.to_datetime(rows["timestamp"], utc=True)
    first = stamps.min().normalize()
    day = ((stamps - first) // pd.Timedelta(days=1)).astype("int64").to_numpy()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in np.unique(day):
        path = folder / f"day-{int(k) + 1}.csv"
        rows[day == k].to_csv(path, index=False)
        last = stamps[day == k].max().timestamp()
        os.utime(path, (last, last))
        paths.append(path)
    return paths
