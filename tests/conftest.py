"""Shared fixtures. Environment for Prefect/GX is set here, before anything imports them.

What every folder of tests/ needs (the Hypothesis profiles, :func:`wait_for`, the shared datasets path, the logger
restore) and what several folders share (the SQLite / PostgreSQL ``sql_url``, :func:`postgres_database`, the
temporary Prefect API). Nothing heavy is imported at module level: ``pytest tests/core tests/metrics`` runs in a
core-only install. Fixtures of one folder are in that folder's conftest.py (tests/services: real servers;
tests/gx: the Spark session).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Hypothesis is deterministic by default (the README test command and CI): the same examples every run, so a green
# run stays green. `HYPOTHESIS_PROFILE=explore` (`make test-explore`) searches new random examples instead; a
# failure found there becomes an explicit @example.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, max_examples=500, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

SHARED_DATA = Path(os.environ.get("LABELGATE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.05, *,
             give_up: Callable[[], bool] | None = None, what: str = "the condition") -> Any:
    """Poll ``predicate`` until it returns a truthy value, and return that value.

    Tests that wait on wall-clock events (a server starting, a scheduled run, another thread taking a lock) wait on
    the event itself, with a bound generous enough for a loaded CI machine, never on a fixed sleep: a fixed sleep is
    either too short under load (a flaky failure) or wasted time. ``give_up`` ends the wait early (e.g. the process
    being waited on has exited).

    Raises
    ------
    TimeoutError
        When ``timeout`` seconds pass, or ``give_up()`` is true, before the predicate holds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if give_up is not None and give_up():
            raise TimeoutError(f"gave up waiting for {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL for tests that run on both engines: a fresh SQLite file, or the test PostgreSQL server
    (``LABELGATE_TEST_POSTGRES_URL``; skipped without it or without the psycopg driver)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tables.db'}"
    url = os.environ.get("LABELGATE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("LABELGATE_TEST_POSTGRES_URL is not set")
    pytest.importorskip("psycopg", reason="the PostgreSQL tests need the psycopg driver")
    return url


@contextlib.contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """A database of its own on the test PostgreSQL server (``LABELGATE_TEST_POSTGRES_URL``), dropped afterwards;
    its URL. Skips, naming the cause, without the server, the psycopg driver or the right to create a database."""
    url = os.environ.get("LABELGATE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("LABELGATE_TEST_POSTGRES_URL is not set: the PostgreSQL variant needs a server "
                    "(eval \"$(scripts/services.sh postgres)\")")
    pytest.importorskip("psycopg", reason="the PostgreSQL tests need the psycopg driver")
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        admin.dispose()
        pytest.skip(f"cannot create a test database on the PostgreSQL server of LABELGATE_TEST_POSTGRES_URL: "
                    f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


#: Loggers whose level, handlers or propagation the command line changes in its own process (``labelgate gate``
#: silences them, ``labelgate serve`` gives its logger a handler): restored after every test, so a CLI test that
#: runs in-process never mutes the log another test of the same worker reads.
CLI_LOGGERS = ("labelgate", "labelgate.serve", "labelgate.gate", "prefect", "great_expectations", "distributed")


@pytest.fixture(autouse=True)
def _restore_cli_loggers() -> Any:
    saved = {name: (lg.level, list(lg.handlers), lg.propagate)
             for name in CLI_LOGGERS for lg in (logging.getLogger(name),)}
    yield
    for name, (level, handlers, propagate) in saved.items():
        lg = logging.getLogger(name)
        lg.setLevel(level)
        lg.handlers[:] = handlers
        lg.propagate = propagate


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared real datasets folder; tests using it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared datasets not found at {SHARED_DATA} (set LABELGATE_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def prefect_api():
    """One temporary Prefect API (SQLite) for the whole test session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield
