"""The monitor as a scheduled Prefect deployment against a real ``prefect server start`` on 127.0.0.1.

Starts a server (random free port, its own PREFECT_HOME), serves ``flows/serve_monitor.py`` with a 5-second
interval and waits for two monitor passes in the results store; both processes (and the flow-run processes
the runner spawns, in the runner's process group) are stopped at the end. Skips when the server cannot start.
52 s on two quiet cores (with four busy loops on them, the first two passes came within 17 s of the runner's
start); up to about 110 s at load average 16. The wait is bounded
at 300 s because it ends as soon as the passes are there; a failure prints the server's flow runs by state and
the tails of both logs, so that a run that never started (scheduler) is told apart from one that never finished
(runner or flow). The flow itself, on the session's temporary API: tests/flows/test_monitor_flow.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from labelgate.monitor import count_passes
from tests.conftest import wait_for
from tests.flows.test_monitor_flow import ROOT, write_config
from tests.services.conftest import prefect_api_healthy

PREFECT = Path(sys.executable).parent / "prefect"
ACCESS_LINE = re.compile(r"INFO:\s+\d+\.\d+\.\d+\.\d+:\d+ - ")  # uvicorn's log line per request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the process group we started (the runner's flow-run children too), then SIGKILL."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def wait_healthy(port: int, process: subprocess.Popen, timeout: float) -> bool:
    api = f"http://127.0.0.1:{port}/api"
    try:
        return wait_for(lambda: prefect_api_healthy(api), timeout=timeout, interval=0.5,
                        give_up=lambda: process.poll() is not None, what="a healthy Prefect server")
    except TimeoutError:
        return False


@pytest.fixture
def prefect_server(tmp_path):
    if not PREFECT.exists():
        pytest.skip(f"the prefect command is not installed next to {sys.executable}")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        # the main scheduler's loop (60 s by default) is the fallback when the 5-second "recent deployments"
        # loop misses the new deployment; a short loop keeps that fallback within the test's wait
        PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="5",
        PREFECT_SERVER_LOGGING_LEVEL="INFO",  # the scheduler says "Scheduled N runs" in server.log
    )
    log = open(tmp_path / "server.log", "w")  # closed below
    server = subprocess.Popen(
        [str(PREFECT), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        if not wait_healthy(port, server, timeout=120):
            pytest.skip(
                f"prefect server start did not become healthy on 127.0.0.1:{port} within 120 s; see "
                f"{tmp_path / 'server.log'}"
            )
        yield {"url": f"http://127.0.0.1:{port}/api", "env": env}
    finally:
        stop(server)
        log.close()


def flow_runs(api: str, **state_filter: object) -> list[dict]:
    """Flow runs on the server's API (at most 200), optionally filtered by ``flow_runs.state``."""
    body: dict = {"limit": 200}
    if state_filter:
        body["flow_runs"] = {"state": state_filter}
    request = urllib.request.Request(
        f"{api}/flow_runs/filter",
        method="POST",
        headers={"Content-Type": "application/json"},
        data=json.dumps(body).encode(),
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def completed_runs(api: str) -> int:
    """Completed flow runs created from a deployment (the schedule), read from the server's API."""
    runs = flow_runs(api, type={"any_": ["COMPLETED"]})
    return sum(1 for r in runs if r.get("state_type") == "COMPLETED" and r.get("deployment_id"))


def diagnosis(api: str, tmp_path: Path) -> str:
    """What the server holds (flow runs by state) and the tails of the runner's and the server's logs."""
    try:
        states = Counter(r.get("state_name") for r in flow_runs(api))
    except OSError as error:  # the server itself may be what failed
        states = Counter({f"(API unreadable: {error})": 1})
    tails = []
    for name in ("runner.log", "server.log"):
        lines = (tmp_path / name).read_text(errors="replace").splitlines()
        kept = [line for line in lines if line.strip() and not ACCESS_LINE.match(line)]  # not one line per request
        tails.append(f"{name}:\n" + "\n".join(kept[-30:]))
    return f"flow runs by state: {dict(states)}\n" + "\n".join(tails)


def test_scheduled_deployment_runs_at_least_two_passes(prefect_server, tmp_path):
    config = write_config(tmp_path / "job")
    env = {
        **prefect_server["env"],
        "PREFECT_API_URL": prefect_server["url"],
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }
    log = open(tmp_path / "runner.log", "w")  # closed below
    runner = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "flows" / "serve_monitor.py"),
            "--config",
            str(config),
            "--interval",
            "5",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    seen = {"passes": 0, "runs": 0}

    def two_scheduled_runs_completed() -> bool:
        seen["passes"] = count_passes(str(config))
        seen["runs"] = completed_runs(prefect_server["url"]) if seen["passes"] >= 2 else 0
        return seen["runs"] >= 2

    try:
        try:  # each check reads the store and the API: once a second is enough
            wait_for(two_scheduled_runs_completed, timeout=300, interval=1,
                     give_up=lambda: runner.poll() is not None, what="two completed scheduled runs")
        except TimeoutError:
            pass  # the assertions below say what was missing
        log.flush()
        passes, runs = seen["passes"], seen["runs"]
        if passes < 2 or runs < 2:
            pytest.fail(f"{passes} pass(es), {runs} completed scheduled flow run(s); "
                        f"{diagnosis(prefect_server['url'], tmp_path)}")
    finally:
        stop(runner)
        log.close()
    assert count_passes(str(config), status="error") == 0
