"""Start-up latency of what a user starts: ``import labelgate``, ``labelgate --help``, the CLI's early errors and a
stored-decision rerun — each a fresh process, against ``import numpy`` / ``import pandas`` timed in the same run.

Paired, interleaved timings (:func:`timing.paired_processes`): every round runs each command once, in an order that
alternates between rounds, so load changes on a shared machine hit every command alike. Printed: median and spread
(min–max) in seconds, and one ``RATIO`` line per target: the median of the per-round ratios with its min–max.

Run: ``python benchmarks/bench_startup.py [--rounds 11]`` (from the repository root, with the project installed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import bench_env, paired_processes, ratio_line, spread

CONFIG = """
gates:
  - type: normalized_cross_kappa
    min_value: 0.8
interval: {n_boot: 200, seed: 0}
store: {url: "sqlite:///results.db"}
reports: {dir: "reports"}
"""


def _labelgate() -> list[str]:
    return [sys.executable, "-c", "from labelgate.cli.main import main; main()"]


def commands(work: Path) -> dict[str, list[str]]:
    gate = [*_labelgate(), "gate", "--config", str(work / "gate.yaml")]
    return {
        "import numpy": [sys.executable, "-c", "import numpy"],
        "import pandas": [sys.executable, "-c", "import pandas"],
        "import labelgate": [sys.executable, "-c", "import labelgate"],
        "labelgate --help": [*_labelgate(), "--help"],
        "config error": [*_labelgate(), "gate", "--config", str(work / "bad.yaml"), "--batch", str(work / "b.csv")],
        "input error": [*gate, "--batch", str(work / "renamed.csv"), "--trusted", str(work / "t.csv")],
        "stored-decision rerun": [*gate, "--batch", str(work / "b.csv"), "--trusted", str(work / "t.csv")],
    }


# (line, measured, reference, target ratio)
RATIOS = [
    ("import labelgate", "import numpy", 2.0),
    ("labelgate --help", "import pandas", 2.0),
    ("config error", "import pandas", 3.0),
    ("input error", "import pandas", 3.0),
    ("stored-decision rerun", "import pandas", 4.0),
]


def prepare(work: Path) -> None:
    from labelgate.pipeline.synth import scenario_named, simulate

    frame = simulate(scenario_named("good", 2000), seed=3)
    frame[frame["pool"] == "crowd"].to_csv(work / "b.csv", index=False)
    frame[frame["pool"] == "trusted"].to_csv(work / "t.csv", index=False)
    frame[frame["pool"] == "crowd"].rename(columns={"rater_id": "worker"}).to_csv(work / "renamed.csv", index=False)
    (work / "gate.yaml").write_text(CONFIG, encoding="utf-8")
    (work / "bad.yaml").write_text("gates:\n  - type: cross_kappa\n    min_valu: 0.3\n", encoding="utf-8")
    # the first gate run computes and stores the decision (not timed); later runs reuse it
    first = subprocess.run(commands(work)["stored-decision rerun"], capture_output=True, text=True, cwd=work)
    if first.returncode != 0:
        raise SystemExit(f"the first gate run failed: {first.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        prepare(work)
        cmds = commands(work)
        # exit status of each command: the two error commands must fail as a user would see them fail
        times = paired_processes(cmds, args.rounds, cwd=work, env=bench_env(), expect={"config error": 3,
                                                                                      "input error": 3})
    print(f"{args.rounds} interleaved rounds, fresh processes, load average {os.getloadavg()[0]:.1f}")
    for name, t in times.items():
        print(f"  {name:<24} process s {spread(t['process'])}")
    for name, reference, target in RATIOS:
        print(ratio_line(times, name, reference, target, clock="process"))


if __name__ == "__main__":
    main()
