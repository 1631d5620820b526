"""Fixtures of the tests that start or need real servers: a ``prefect server start`` for the session, a Label Studio
server, and the helpers to wait for and stop them."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for


def prefect_api_healthy(api: str) -> bool:
    """Whether the Prefect API at ``api`` (``http://host:port/api``) answers its health check (a predicate to poll)."""
    try:
        with urllib.request.urlopen(f"{api}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


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


LABEL_STUDIO_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "label_studio.sh"


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
