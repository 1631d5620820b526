"""`labelgate.gate.run`: the gate as one Python call, without Prefect (which must not even be importable)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from labelgate.pipeline.synth import scenario_named, simulate

PROBE = """
import json, sys
sys.modules["prefect"] = None  # as if Prefect were not installed: any `import prefect` fails
from labelgate.gate import run
from labelgate.reporting.report import write_gate_report
out = {}
for name in ("good", "contentment"):
    summary = run(sys.argv[1], sys.argv[2] + f"/{name}-crowd.csv", sys.argv[2] + f"/{name}-trusted.csv")
    out[name] = summary["decision"]
reports = run(sys.argv[1], sys.argv[2] + "/good-crowd.csv", sys.argv[2] + "/good-trusted.csv", force=True,
              hooks=__import__("labelgate.gate", fromlist=["Hooks"]).Hooks(publish=write_gate_report))
out["report"] = reports["report"]
out["prefect_loaded"] = any(m.split(".")[0] == "prefect" and sys.modules[m] is not None for m in sys.modules)
print(json.dumps(out))
"""

CONFIG = """
gates:
  - type: normalized_cross_kappa
    min_value: 0.8
interval: {{n_boot: 200, seed: 0}}
store: {{url: "sqlite:///{store}"}}
reports: {{dir: "{reports}"}}
"""


def test_the_gate_runs_without_prefect(tmp_path: Path):
    for name, seed in (("good", 1), ("contentment", 3)):
        frame = simulate(scenario_named(name, 600), seed=seed)
        frame[frame["pool"] == "crowd"].to_csv(tmp_path / f"{name}-crowd.csv", index=False)
        frame[frame["pool"] == "trusted"].to_csv(tmp_path / f"{name}-trusted.csv", index=False)
    config = tmp_path / "gate.yaml"
    config.write_text(CONFIG.format(store=(tmp_path / "r.db").as_posix(), reports=(tmp_path / "rep").as_posix()))
    out = subprocess.run([sys.executable, "-c", PROBE, str(config), str(tmp_path)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["good"] == "ACCEPT"
    assert result["contentment"] == "REJECT"
    assert result["report"] and Path(result["report"]).is_file()
    assert result["prefect_loaded"] is False
