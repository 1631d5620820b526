"""Paired, interleaved timing of fresh processes: what a user starts, timed from outside.

Every round runs each command once, in an order that reverses every round, so that a change of load on the shared
machine hits every command alike. A ratio is computed per round and reported as the median of the rounds with its
min–max (``bench_routes.ratio_line``: the ``RATIO ... target <= X: meets|MISSES`` format that ``benchmarks/run.py``
collects into docs/benchmarks.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from bench_routes import limit_line, ratio_line, spread  # noqa: E402, F401  (one implementation of the line formats)

Times = dict[str, dict[str, list[float]]]
__all__ = ["Times", "bench_env", "paired_processes", "process_lines", "ratio_line", "spread"]


def bench_env(**extra: str) -> dict[str, str]:
    """The environment of a timed process: one BLAS thread (as the ``labelgate`` command sets), plus ``extra``."""
    # modules load from their bytecode cache, as in a user's install (never compiled anew in each timed process)
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**inherited, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"), **extra}


def paired_processes(commands: Mapping[str, Sequence[str]], rounds: int, *, cwd: Path | None = None,
                     env: Mapping[str, str] | None = None, expect: Mapping[str, int] | None = None,
                     timeout: float = 600.0) -> Times:
    """Run every command once per round, order reversing each round; wall seconds of each whole process.

    Parameters
    ----------
    commands : mapping of str to sequence of str
        Name → argv of a fresh process.
    rounds : int
        Paired rounds (≥ 1).
    cwd, env : optional
        Working directory and environment of every process (default: :func:`bench_env`).
    expect : mapping of str to int, optional
        Exit status each named command must return (default 0 for every command). Any other status stops the
        benchmark with the process's stderr: a timing of a failed run measures nothing.
    timeout : float
        Seconds one process may take.

    Returns
    -------
    dict
        ``{name: {"process": [seconds per round]}}``, for :func:`bench_routes.ratio_line` with ``clock="process"``.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    names = list(commands)
    times: Times = {name: {"process": []} for name in names}
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            proc = subprocess.run(list(commands[name]), capture_output=True, text=True, cwd=cwd,
                                  env=dict(env) if env is not None else bench_env(), timeout=timeout, check=False)
            times[name]["process"].append(time.perf_counter() - start)
            wanted = (expect or {}).get(name, 0)
            if proc.returncode != wanted:
                tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
                raise RuntimeError(f"{name!r} exited {proc.returncode} (expected {wanted}): {tail}")
    return times


def process_lines(times: Times, label: str = "") -> list[str]:
    """One line per command: median (min–max) of the whole-process wall time."""
    return [f"  {name:<58} {label:<14} process s {spread(t['process'])}" for name, t in times.items()]
