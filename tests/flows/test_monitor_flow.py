"""The monitor flow on the session's temporary Prefect API (one pass, then none new), and the serve script refusing to
run without a server. (The monitor as a scheduled deployment against a real ``prefect server start``:
tests/services/test_monitor_deployment.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labelgate.monitor import count_passes

ROOT = Path(__file__).resolve().parents[2]
DELIVERY = "item_id,rater_id,label,pool\n1,a,x,crowd\n1,b,x,crowd\n2,a,y,crowd\n2,b,x,crowd\n1,t,x,trusted\n"


def write_config(root: Path) -> Path:
    (root / "drop").mkdir(parents=True)
    (root / "drop" / "d1.csv").write_text(DELIVERY, encoding="utf-8")
    path = root / "monitor.yaml"
    path.write_text(
        json.dumps(
            {
                "store": {"url": f"sqlite:///{root / 'results.db'}"},
                "monitor": {"name": "scheduled", "source": {"path": str(root / "drop")}},
            }
        ),
        encoding="utf-8",
    )
    return path


def test_serve_script_refuses_to_run_without_a_server(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "flows" / "serve_monitor.py"), "--config", "x.yaml"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "ephemeral API cannot schedule" in out.stderr


@pytest.mark.usefixtures("prefect_api")
def test_monitor_flow_runs_one_pass(tmp_path):
    from labelgate.flows.monitor import monitor_flow

    config = write_config(tmp_path)
    summary = monitor_flow(str(config))
    assert summary["n_new"] == 5 and summary["status"] == "ok"
    assert monitor_flow(str(config))["n_new"] == 0
    assert count_passes(str(config)) == 2
