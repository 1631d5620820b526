# Transitional: the monitor's tables live in labelgate.pipeline.tables (one schema, one migration chain).
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.engine import Connection

from labelgate.pipeline.database import MONITOR_PASS_LOCK, transaction
from labelgate.pipeline.migrations import migrate
from labelgate.pipeline.tables import *  # noqa: F401,F403
from labelgate.pipeline.tables import keys_table  # noqa: F401


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    with transaction(engine, write=True, lock=MONITOR_PASS_LOCK) as conn:
        yield conn


@contextmanager
def read_transaction(engine: Engine) -> Iterator[Connection]:
    with transaction(engine) as conn:
        yield conn


__all__ = ["migrate", "read_transaction", "write_transaction"]
