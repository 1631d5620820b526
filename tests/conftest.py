"""Shared fixtures. Environment for Prefect/GX is set here, before anything imports them."""

from __future__ import annotations

import contextlib
import logging
import os
import time
import urllib.request
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


def prefect_api_healthy(api: str) -> bool:
    """Whether the Prefect API at ``api`` (``http://host:port/api``) answers its health check (a predicate to poll)."""
    try:
        with urllib.request.urlopen(f"{api}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


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


@pytest.fixture(scope="session")
def prefect_server_session(tmp_path_factory):
    """A real ``prefect server start`` on a free port of 127.0.0.1 for the session (its own PREFECT_HOME):
    ``{"url": ".../api", "env": environment for clients}``. Skips when it is not healthy within 180 s."""
    import socket
    import subprocess
    import sys

    prefect = Path(sys.executable).parent / "prefect"
    if not prefect.exists():
        pytest.skip(f"the prefect command is not installed next to {sys.executable}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tmp_path_factory.mktemp("prefect-server")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home / "home"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    with open(home / "server.log", "w") as log:
        server = subprocess.Popen([str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                                  env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        api = f"http://127.0.0.1:{port}/api"
        try:
            try:
                wait_for(lambda: prefect_api_healthy(api), timeout=180, interval=0.5,
                         give_up=lambda: server.poll() is not None, what="a healthy Prefect server")
            except TimeoutError as exc:
                pytest.skip(f"prefect server start was not healthy on 127.0.0.1:{port} ({exc}); see "
                            f"{home / 'server.log'}")
            yield {"url": api, "env": {**env, "PREFECT_API_URL": api}}
        finally:
            stop_process_group(server)


def stop_process_group(process: Any, timeout: float = 60.0) -> None:
    """SIGTERM to the process group of a child started with ``start_new_session=True`` (its own children too); SIGKILL
    when it has not exited within ``timeout`` seconds."""
    import signal
    import subprocess

    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


LABEL_STUDIO_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "label_studio.sh"


@pytest.fixture(scope="session")
def label_studio_server() -> Any:
    """A real Label Studio server: ``{"url", "user", "password", "token", "dir"}`` (its data folder).

    Uses ``LABELGATE_TEST_LS_URL`` / ``_USER`` / ``_PASSWORD`` / ``_TOKEN`` when set (``eval "$(scripts/label_studio.sh
    start)"``); otherwise runs ``scripts/label_studio.sh start`` itself when its virtualenv exists (``$LABELGATE_LS_VENV``,
    default ``~/.cache/labelgate/label-studio-venv``) and stops it at the end; otherwise skips, saying how to install it.
    """
    import subprocess

    keys = ("URL", "USER", "PASSWORD", "TOKEN", "DIR")
    if os.environ.get("LABELGATE_TEST_LS_URL"):
        yield {k.lower(): os.environ.get(f"LABELGATE_TEST_LS_{k}", "") for k in keys}
        return
    venv = Path(os.environ.get("LABELGATE_LS_VENV", Path.home() / ".cache" / "labelgate" / "label-studio-venv"))
    if not (venv / "bin" / "label-studio").exists():
        pytest.skip(f"no Label Studio server: set LABELGATE_TEST_LS_URL (eval \"$(scripts/label_studio.sh start)\") or "
                    f"install one with scripts/label_studio.sh install (virtualenv {venv} is absent)")
    started = subprocess.run([str(LABEL_STUDIO_SCRIPT), "start"], capture_output=True, text=True, timeout=600)
    exported = dict(line.removeprefix("export ").split("=", 1) for line in started.stdout.splitlines()
                    if line.startswith("export "))
    if started.returncode != 0 or "LABELGATE_TEST_LS_URL" not in exported:
        pytest.skip(f"scripts/label_studio.sh start failed: {started.stderr[-500:]}")
    try:
        yield {k.lower(): exported.get(f"LABELGATE_TEST_LS_{k}", "") for k in keys}
    finally:
        subprocess.run([str(LABEL_STUDIO_SCRIPT), "stop", exported["LABELGATE_TEST_LS_DIR"]], capture_output=True,
                       timeout=120)


@pytest.fixture(scope="session")
def spark_session() -> Any:
    """One local Spark session for the whole test session (one JVM: starting one takes seconds).

    ``local[1]``, a small driver, no UI, one shuffle partition. Skips when pyspark (``pip install -e ".[spark]"``,
    part of ``make setup``) or a Java runtime (Spark 4 needs Java 17) is missing, or when the session does not start.
    """
    import shutil

    pytest.importorskip("pyspark", reason="pyspark is not installed (the 'spark' extra; `make setup` installs it)")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("no Java runtime for Spark: install Java 17 (e.g. openjdk-17-jre-headless) or set JAVA_HOME")
    from pyspark.sql import SparkSession

    try:
        spark = (SparkSession.builder.master("local[1]").appName("labelgate-tests")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "512m").config("spark.sql.shuffle.partitions", "1")
                 .getOrCreate())
    except Exception as exc:  # a JVM that does not start (wrong Java version, no memory)
        first = (str(exc).splitlines() or [""])[0][:300]
        pytest.skip(f"a local Spark session did not start: {type(exc).__name__}: {first}")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()
