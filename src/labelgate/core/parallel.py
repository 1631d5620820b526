"""Independent steps of a large build or panel run on threads.

numpy releases the interpreter lock in the loops that dominate a build (sorts, gathers, element-wise passes),
so two steps that share no data — coding the item column and the rater column, building or measuring two
pools — run side by side on two cores. The results do not depend on the threads: each step computes what it
computes alone (in a copy of the caller's context variables), results come back in the order of the steps, and
when steps fail, the first failing step in that order raises (every step has finished by then; an interrupt while
waiting drops the steps not yet started). The standard library only.

The number of threads is the environment variable ``LABELGATE_THREADS`` (1 turns threads off), else the CPUs
this process may run on. Tables under :data:`MIN_ROWS` rows run the steps one after another: there, starting
threads costs more than it saves. So do steps of which two or more hold the interpreter lock for most of their
time (``holds_interpreter_lock``: columns coded value by value as Python objects, hashed or joined into bytes):
those threads would only take turns, and handing the lock back and forth costs CPU. Measured on 10^6 rows whose
two id columns are object arrays of strings: 118 ms of CPU one after another against 138 ms on two threads, with no
gain in wall time (118 against 115 ms).
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Sequence
from typing import TypeVar

from labelgate.errors import ParameterError

T = TypeVar("T")

#: Rows below which steps run one after another.
MIN_ROWS = 1 << 19

#: The environment variable that sets the number of threads.
THREADS_VARIABLE = "LABELGATE_THREADS"


def thread_count() -> int:
    """``LABELGATE_THREADS`` when set (an integer >= 1), else the CPUs this process may run on.

    Raises
    ------
    ParameterError
        The variable is set to something other than a positive integer.
    """
    raw = os.environ.get(THREADS_VARIABLE, "").strip()
    if raw:
        if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
            raise ParameterError(f"{THREADS_VARIABLE} must be a positive integer; got {raw!r}.")
        return int(raw)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # platforms without CPU affinity
        return os.cpu_count() or 1


def run_steps(steps: Sequence[Callable[[], T]], rows: int, *, max_threads: int | None = None,
              holds_interpreter_lock: Sequence[bool] = ()) -> list[T]:
    """The results of ``steps`` in their order: on threads when there are ``rows >= MIN_ROWS`` rows, more than
    one thread and at most one step flagged in ``holds_interpreter_lock`` (by position: the step holds the lock
    for most of its time), else one after another.

    ``max_threads`` caps the threads below :func:`thread_count`: the steps start in their order, each on the first
    free thread, so a later step can be held back until an earlier one has ended (and made what it reuses).

    Examples
    --------
    >>> run_steps([lambda: 1, lambda: 2], rows=10)
    [1, 2]
    """
    allowed = thread_count()  # read on every call: a bad setting fails on small tables too, not first in production
    threaded = rows >= MIN_ROWS and sum(holds_interpreter_lock) < 2
    workers = min(len(steps), allowed, max_threads or allowed) if threaded else 1
    if workers < 2:
        return [step() for step in steps]
    from concurrent.futures import ThreadPoolExecutor, wait  # only here: `import labelgate` stays light

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="labelgate")
    try:
        # each step in a copy of the caller's context: context variables (shared bootstrap resamples) reach it
        futures = [pool.submit(contextvars.copy_context().run, step) for step in steps]
        wait(futures)
    except BaseException:  # an interrupt while waiting: steps not started are dropped, the running ones end alone
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [future.result() for future in futures]  # the first failure in step order raises
