"""The gate as a user starts it: ``labelgate gate`` in a fresh process, against reading its input, the library route
to the same metrics, the same gate through the Python API, and the gate as a Prefect flow — paired, interleaved
rounds.

Every round runs each of these fresh processes once, in an order that reverses every round (:mod:`timing`):

* ``read inputs``: ``pd.read_csv`` of the batch and of the trusted file (the floor: a process that reads the files);
* ``library route``: read both files, ``Ratings.from_long`` each (per question), then the gate's metrics with the
  gate's intervals — normalized κx, α of both pools, κx and SPA, ``ci=0.95``, the configuration's ``n_boot`` —
  what a user who skips the gate would write;
* ``Prefect trivial flow``: a process that runs one empty ``@flow`` (Prefect's import and the first start of its
  local API on SQLite, which a flow run without ``PREFECT_API_URL`` pays);
* ``labelgate gate --force``: the command on the demo configuration (``labelgate demo``'s gates, interval and
  stores), with ``--force`` so that every round computes (no stored decision is reused). No Prefect API is named, so
  it runs in its process without Prefect (``--prefect auto``). It must ACCEPT (exit 0);
* ``labelgate.gate.run``: the same gate through the Python API in a fresh process, ``force=True`` and the HTML report
  writer (the same work: validation, GX, diagnostics, report, store), so that the command's own cost is the ratio
  of the two (target ≤ 1.5×: the command line must not make the gate slower than a script);
* ``labelgate gate --force --prefect always``: the command as a Prefect flow on Prefect's temporary local API (what
  every ``labelgate gate`` paid before ``--prefect auto``).

Beyond the library route, the gate validates the input (pandera, Great Expectations suites and Data Docs), runs the
per-rater diagnostics and ρxy (``diagnose``), writes the HTML report, the results store and the audit log.
Printed: median (min–max) of each process's wall time; ``RATIO`` lines (median of the per-round ratios); and the
issue-5 figure, the gate as a flow beyond Prefect's start-up (flow gate − trivial flow in the same round; target
≤ 10 s).

Run: ``python benchmarks/bench_gate.py [--rounds 5] [--n-items 2000] [--n-boot 1000]`` (the demo's batch: the
``good`` scenario, seed 7), or ``--judgements 100000`` for issue 5's batch (3 questions in a ``question`` column,
the same gates per question).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from timing import bench_env, limit_line, paired_processes, process_lines, ratio_line

TARGET_BEYOND_PREFECT_S = 10.0  # issue 5: the gate itself, beyond Prefect's start-up
TARGET_CLI_OVER_API = 1.5  # `labelgate gate` in-process against the same gate through labelgate.gate.run

LIBRARY = """\
import pandas as pd
import labelgate as lg
b, t = pd.read_csv({batch!r}), pd.read_csv({trusted!r})
questions = sorted(b["question"].unique()) if "question" in b.columns else [None]
kw = dict(ci=0.95, n_boot={n_boot}, seed=0)
for q in questions:
    x = lg.Ratings.from_long(b if q is None else b[b["question"] == q])
    y = lg.Ratings.from_long(t if q is None else t[t["question"] == q])
    values = [lg.normalized_cross_kappa(x, y, **kw), lg.krippendorff_alpha(x, **kw), lg.krippendorff_alpha(y, **kw),
              lg.cross_kappa(x, y, **kw), lg.spa(x, **kw)]
"""
READ = "import pandas as pd\npd.read_csv({batch!r}); pd.read_csv({trusted!r})\n"
TRIVIAL_FLOW = "from prefect import flow\n\n@flow\ndef trivial():\n    return 1\n\ntrivial()\n"
API = """\
from labelgate.gate import Hooks, run
from labelgate.reporting.report import write_gate_report
summary = run({config!r}, {batch!r}, {trusted!r}, force=True, hooks=Hooks(publish=write_gate_report))
raise SystemExit(0 if summary["decision"] == "ACCEPT" else 1)
"""


def demo_data(folder: Path, n_items: int, n_boot: int) -> tuple[Path, Path, Path]:
    """The demo's good batch and its configuration (``labelgate demo``), in ``folder``."""
    from labelgate.cli.main import DEMO_CONFIG, write_synthetic

    paths = write_synthetic(folder / "data", "good", n_items, seed=7)
    config = folder / "gate.yaml"
    config.write_text(DEMO_CONFIG.format(store=(folder / "results.db").as_posix(),
                                         reports=(folder / "reports").as_posix(), n_boot=n_boot), encoding="utf-8")
    return paths["batch"], paths["trusted"], config


def three_questions(folder: Path, judgements: int, n_boot: int, seed: int = 0) -> tuple[Path, Path, Path]:
    """Issue 5's batch: three questions in a `question` column; ~3 crowd ratings per item, trusted on half."""
    from labelgate.pipeline.synth import PoolSpec, Scenario, simulate

    per_question = judgements // 3
    n_items = max(100, int(per_question / (3 + 0.5 * 3)))  # crowd 2-4 (mean 3) + trusted 3 on half
    scenario = Scenario(n_items=n_items, questions=("sentiment", "toxicity", "topic"), pools=(
        PoolSpec("crowd", n_raters=2000, ratings_per_item=(2, 4), noise=0.1),
        PoolSpec("trusted", n_raters=30, ratings_per_item=(3, 3), noise=0.1, item_share=0.5)))
    data = simulate(scenario, seed=seed)
    batch, trusted = folder / "batch.csv", folder / "trusted.csv"
    data[data["pool"] == "crowd"].to_csv(batch, index=False)
    data[data["pool"] == "trusted"].to_csv(trusted, index=False)
    config = folder / "gate.yaml"
    questions = "\n".join(f"  - {{name: {q}}}" for q in scenario.questions)
    config.write_text(f"""
columns: {{question: question}}
questions:
{questions}
gates:
  - {{type: normalized_cross_kappa, min_value: 0.8}}
  - {{type: irr_baseline, tolerance: 0.1}}
  - {{type: cross_kappa, min_value: 0.2, severity: warning}}
  - {{type: spa, min_value: 0.3, severity: warning}}
interval: {{n_boot: {n_boot}, seed: 0}}
store: {{url: "sqlite:///{(folder / 'results.db').as_posix()}"}}
reports: {{dir: "{(folder / 'reports').as_posix()}"}}
""", encoding="utf-8")
    return batch, trusted, config


def labelgate_command() -> list[str]:
    """The installed ``labelgate`` console script next to this interpreter (the ``-c`` entry point otherwise)."""
    script = Path(sys.executable).with_name("labelgate")
    return [str(script)] if script.exists() else [sys.executable, "-c", "from labelgate.cli.main import main; main()"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n-items", type=int, default=2000, help="items of the demo batch (the demo's default)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (the demo's default)")
    parser.add_argument("--judgements", type=int, help="issue 5's 3-question batch of this size instead of the demo's")
    args = parser.parse_args(argv)
    # the settings the command sets for itself, for every process alike (the Python API route included)
    env = bench_env(PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_LOGGING_LEVEL="CRITICAL",
                    GX_ANALYTICS_ENABLED="false")
    env.pop("PREFECT_API_URL", None)  # a user's shell without a server: the command runs in-process
    with tempfile.TemporaryDirectory(prefix="labelgate-bench-gate-") as tmp:
        folder = Path(tmp)
        if args.judgements:
            batch, trusted, config = three_questions(folder, args.judgements, args.n_boot)
        else:
            batch, trusted, config = demo_data(folder, args.n_items, args.n_boot)
        rows = sum(1 for _ in batch.open()) + sum(1 for _ in trusted.open()) - 2
        files = {"batch": str(batch), "trusted": str(trusted), "n_boot": args.n_boot}
        gate = "labelgate gate --force (demo config)" if not args.judgements else "labelgate gate --force"
        argv = [*labelgate_command(), "gate", "--config", str(config), "--batch", str(batch), "--trusted",
                str(trusted), "--force", "--json"]
        api, flow = "labelgate.gate.run (Python API, same gate)", f"{gate} --prefect always"
        commands = {
            "read inputs (pd.read_csv batch + trusted)": [sys.executable, "-c", READ.format(**files)],
            "library route (from_long + the gate's metrics, CIs)": [sys.executable, "-c", LIBRARY.format(**files)],
            "Prefect trivial flow": [sys.executable, "-c", TRIVIAL_FLOW],
            gate: argv,
            api: [sys.executable, "-c", API.format(config=str(config), **files)],
            flow: [*argv, "--prefect", "always"],
        }
        times = paired_processes(commands, args.rounds, cwd=folder, env=env)
    read, library, prefect = list(commands)[:3]
    print(f"# bench_gate: {rows:,} judgements (batch + trusted), n_boot {args.n_boot}, {args.rounds} paired rounds "
          f"of fresh processes; load average at the end {os.getloadavg()[0]:.1f}")
    print("\n".join(process_lines(times, f"{rows:,} rows")))
    for reference in (read, library):
        print(ratio_line(times, gate, reference, None, clock="process"))
    print(ratio_line(times, gate, api, TARGET_CLI_OVER_API, clock="process"))
    print(ratio_line(times, flow, gate, None, clock="process"))
    print(ratio_line(times, flow, prefect, None, clock="process"))
    beyond = [g - p for g, p in zip(times[flow]["process"], times[prefect]["process"], strict=True)]
    name = "gate as a flow beyond Prefect's start-up (flow gate - trivial flow, per round)"
    print(limit_line({name: {"process": beyond}}, name, TARGET_BEYOND_PREFECT_S, clock="process"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
