"""The driver's handle on the cluster: the lazy Dask import and the per-judgement codes left on the workers."""

from __future__ import annotations

from typing import Any

import numpy as np

from labelgate.core.ratings import IntArray
from labelgate.errors import LabelGateError, ParameterError, Reason
from labelgate.pipeline.dask_ratings.kernels import pool_codes


class DistributedError(LabelGateError, RuntimeError):
    """The per-judgement codes of a :class:`PartitionedRatings` cannot be fetched (released, cluster gone)."""

    default_code = Reason.INVALID_PARAMETER


def import_dask() -> Any:
    """The ``dask`` module, or a :class:`ParameterError` naming the extra that installs it."""
    try:
        import dask
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ParameterError("The Dask backend needs dask: pip install 'labelgate[dask]'.",
                             parameter="frame") from exc
    return dask


class ClusterCodes:
    """The persisted per-partition :class:`~.kernels.Codes`, shared by the pools built from one table.

    Parameters
    ----------
    parts : list
        One persisted Dask object per partition, each computing to a :class:`~.kernels.Codes`.
    n_pools : int
        Pools in the table (1 without a pool column).
    """

    def __init__(self, parts: list[Any], n_pools: int) -> None:
        self.parts: list[Any] | None = parts
        self.n_pools = n_pools

    def fetch(self, pool: int) -> tuple[IntArray, IntArray, IntArray]:
        """(item, rater, value) codes of one pool's judgements, in table order, brought to the driver."""
        if self.parts is None:
            raise DistributedError("The per-judgement codes of these PartitionedRatings were released; call "
                                   "fetch_codes() before release() when a metric needs them.")
        dask = import_dask()
        try:
            pieces = dask.compute(*[dask.delayed(pool_codes)(p, pool, self.n_pools) for p in self.parts])
        except Exception as exc:  # the cluster that holds them is gone
            raise DistributedError("Could not fetch the per-judgement codes from the Dask cluster "
                                   f"({type(exc).__name__}: {exc}); keep the client open, or call fetch_codes() "
                                   "while it is.") from exc
        item, rater, value = (np.concatenate([p[k] for p in pieces]) if pieces else np.empty(0, np.int64)
                              for k in range(3))
        return item, rater, value

    def release(self) -> None:
        """Drop the references to the codes, so that the workers free them."""
        self.parts = None
