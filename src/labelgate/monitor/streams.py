"""Synthetic annotation streams for the monitor's tests, benchmarks and demos (from :mod:`labelgate.pipeline.synth`).

A stream is a sequence of windows of ``window_hours``; window ``w`` holds ``items_per_window`` new items whose
judgements (crowd and, on a share of them, trusted) all fall inside it, as when a labelling platform hands
out a batch of items at a time. The drift scenario of the generator applies per window: inside
``drift_windows`` the crowd's noise is multiplied by ``drift_noise_factor`` (``2`` = noise doubles at a known
time), otherwise the process is stationary.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from labelgate.pipeline.synth import PoolSpec, Scenario, simulate


def stream(
    n_windows: int,
    *,
    items_per_window: int = 150,
    window_hours: float = 1.0,
    noise: float = 0.2,
    drift_windows: tuple[int, int] | None = None,
    drift_noise_factor: float = 2.0,
    seed: int = 0,
    start: datetime | None = None,
    crowd: PoolSpec | None = None,
    trusted: PoolSpec | None = None,
) -> pd.DataFrame:
    """Long judgements with a ``timestamp`` and a ``window`` column (see the module docstring).

    Examples
    --------
    >>> df = stream(3, items_per_window=20, seed=1)
    >>> sorted(df["window"].unique().tolist()), int(df.groupby("item_id")["window"].nunique().max())
    ([0, 1, 2], 1)
    """
    start = start or datetime(2026, 1, 5, tzinfo=UTC)
    crowd = crowd or PoolSpec("crowd", n_raters=80, ratings_per_item=(2, 4), noise=noise)
    trusted = trusted or PoolSpec("trusted", n_raters=12, ratings_per_item=(3, 3), noise=0.1, item_share=0.5)
    base = Scenario(n_items=n_windows * items_per_window, pools=(crowd, trusted))
    normal = simulate(base, seed=seed)
    if drift_windows is not None:
        drifted = simulate(base.with_crowd(noise=min(1.0, crowd.noise * drift_noise_factor)), seed=seed)
    item_no = normal["item_id"].str.slice(5).astype(np.int64).to_numpy()
    window = item_no // items_per_window
    frame = normal
    if drift_windows is not None:
        lo, hi = drift_windows
        inside = (window >= lo) & (window < hi)
        crowd_rows = (normal["pool"] == "crowd").to_numpy()
        # same seed: both simulations have the same items, raters and row order; only noisy labels differ
        frame = normal.copy()
        frame.loc[inside & crowd_rows, "label"] = drifted.loc[inside & crowd_rows, "label"].to_numpy()
    rng = np.random.default_rng(seed + 1)
    offsets = rng.random(len(frame)) * window_hours
    hours = window * window_hours + offsets
    stamps = pd.Timestamp(start) + pd.to_timedelta(np.round(hours * 3.6e9).astype(np.int64), unit="us")
    frame = frame.assign(window=window, timestamp=stamps)
    return frame.sort_values("timestamp", kind="stable").reset_index(drop=True)


def write_deliveries(
    frame: pd.DataFrame,
    folder: Path,
    windows_per_file: int = 1,
    prefix: str = "delivery",
) -> list[Path]:
    """Write a stream as delivery files (one per ``windows_per_file`` windows), timestamps in ISO 8601."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, part in frame.groupby(frame["window"] // windows_per_file, sort=True):
        path = folder / f"{prefix}-{int(k):05d}.csv"
        out = part.drop(columns=["window"]).assign(
            timestamp=pd.to_datetime(part["timestamp"]).dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        )
        out.to_csv(path, index=False)
        paths.append(path)
    return paths
