"""The item bootstrap's resamples, drawn once and shared by the statistics of one batch.

A resample is a vector of item multiplicities (a multinomial draw, :func:`resample_counts`); the bootstrap draws
them in chunks of a ``(chunk, n_items)`` matrix from one generator seeded with ``seed``. They depend on nothing but
``(seed, n_items, n_boot, chunk)``: every statistic bootstrapped with the same seed on an item axis of the same
length draws the same matrices (the expectations of a suite over one batch: κx, the IRR baseline and SPA all
resample the same items). :class:`SharedResamples` keeps the matrices the first bootstrap drew — one byte per
item and resample, ``uint8`` (a multiplicity above 255 keeps its chunk in ``float64``) — and the generator's state
after them (the BCa jackknife's item sample follows the resamples), and serves them to the next bootstrap with the
same key inside :func:`sharing`: the same ``float64`` matrices, so every replicate, and every interval, is the one
an unshared bootstrap gives, bit for bit; drawing 200 resamples of 400,000 items costs about 0.5 s (the draws and
the counting), which the second and third expectation of the gate's suite no longer pay.

What is shared, and what is not: only an integer ``seed`` (a ``Generator`` passed in is the caller's stream, and
``seed=None`` asks for fresh, independent draws); only while the matrices fit the budget (``max_bytes``, default
:data:`MAX_BYTES`: 200 resamples of 670,000 items, or 2,000 of 67,000); the memory lives as long as the
:class:`SharedResamples` object (the GX providers keep one per pools of a batch).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import numpy.typing as npt

#: Bytes of resamples one :class:`SharedResamples` keeps (one byte per item and resample).
MAX_BYTES = 128 << 20


def make_rng(seed: Any) -> np.random.Generator:
    """The bootstrap's generator: SFC64 (fast, PractRand-clean), or the Generator passed in."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.Generator(np.random.SFC64(seed))


def resample_counts(rng: np.random.Generator, n_items: int, size: int) -> npt.NDArray[np.float64]:
    """``size`` bootstrap resamples of ``n_items`` items as a (size, n_items) multiplicity matrix."""
    dtype = np.int32 if n_items < 2**31 else np.int64
    draws = rng.integers(0, n_items, size=(size, n_items), dtype=dtype)
    counts = np.empty((size, n_items), dtype=np.float64)
    for row in range(size):  # one cache-sized bincount per resample beats one scattered bincount over all
        counts[row] = np.bincount(draws[row], minlength=n_items)
    return counts


Key = tuple[int, int, int, int]


class SharedResamples:
    """The resample matrices of the bootstraps run inside :func:`sharing`, by ``(seed, n_items, n_boot, chunk)``.

    Parameters
    ----------
    max_bytes : int
        The most bytes of matrices kept; a bootstrap that would pass it draws its own (unshared).
    """

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self.served = 0  # bootstraps that reused the matrices (for tests and profiling)
        self._entries: dict[Key, tuple[list[np.ndarray], dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """A copy or a pickle is an empty cache with the same budget (the lock cannot be pickled; the matrices
        are a cache, redrawn on demand)."""
        return {"max_bytes": self.max_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["max_bytes"])  # type: ignore[misc]

    def get(self, key: Key) -> tuple[list[np.ndarray], dict[str, Any]] | None:
        """The kept chunks and the generator state after them, or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self.served += 1
            return entry

    def fits(self, n_bytes: int) -> bool:
        """Whether ``n_bytes`` more can be kept."""
        with self._lock:
            return self.used + n_bytes <= self.max_bytes

    def put(self, key: Key, chunks: list[np.ndarray], state: dict[str, Any]) -> None:
        """Keep the chunks of a complete bootstrap (the first one wins when two ran at once)."""
        n_bytes = sum(c.nbytes for c in chunks)
        with self._lock:
            if key not in self._entries and self.used + n_bytes <= self.max_bytes:
                self._entries[key] = (chunks, state)
                self.used += n_bytes


_ACTIVE: ContextVar[SharedResamples | None] = ContextVar("labelgate_shared_resamples", default=None)


@contextmanager
def sharing(resamples: SharedResamples | None) -> Iterator[None]:
    """Bootstraps inside the block reuse (and add to) ``resamples`` (None: no sharing)."""
    token = _ACTIVE.set(resamples)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def resamples(seed: Any, n_items: int, n_boot: int, chunk: int,
              ) -> tuple[Iterator[npt.NDArray[np.float64]], Callable[[], np.random.Generator]]:
    """The ``n_boot`` resamples of ``n_items`` items in chunks of ``chunk`` rows, and the generator after them.

    Returns an iterator of ``(size, n_items)`` float64 multiplicity matrices — the draws of
    ``make_rng(seed)``, shared through the active :class:`SharedResamples` — and a function returning the generator
    in the state it has after the last matrix (call it after the iterator is exhausted).
    """
    shared = _ACTIVE.get()
    rng = make_rng(seed)
    integer_seed = isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)
    if shared is None or not integer_seed:
        return _draw(rng, n_items, n_boot, chunk, None), lambda: rng
    key = (int(seed), n_items, n_boot, chunk)
    entry = shared.get(key)
    if entry is not None:
        chunks, state = entry

        def after() -> np.random.Generator:
            rng.bit_generator.state = state
            return rng

        return (c.astype(np.float64) for c in chunks), after
    keep: list[np.ndarray] | None = [] if shared.fits(n_items * n_boot) else None

    def draws() -> Iterator[npt.NDArray[np.float64]]:
        yield from _draw(rng, n_items, n_boot, chunk, keep)
        if keep is not None:
            shared.put(key, keep, dict(rng.bit_generator.state))

    return draws(), lambda: rng


def _draw(rng: np.random.Generator, n_items: int, n_boot: int, chunk: int,
          keep: list[np.ndarray] | None) -> Iterator[npt.NDArray[np.float64]]:
    """The resample matrices from ``rng``; each also appended to ``keep`` (as ``uint8`` when it fits)."""
    for start in range(0, n_boot, chunk):
        counts = resample_counts(rng, n_items, min(chunk, n_boot - start))
        if keep is not None:
            keep.append(counts.astype(np.uint8) if counts.size and counts.max() <= 255 else counts.copy())
        yield counts
