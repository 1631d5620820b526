"""Gate timing: a 10^5-judgement batch with 3 questions and 2,000 bootstrap resamples.

Target (issue 5): the gate itself, beyond Prefect's start-up, takes <= 10 s. Prefect's start-up (the
ephemeral API's first start) is measured separately by timing a trivial flow first.

Run: ``python benchmarks/bench_gate.py [--judgements 100000] [--n-boot 2000] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

TARGET_SECONDS = 10.0


def make_data(folder: Path, judgements: int, seed: int = 0) -> tuple[Path, Path, Path]:
    """Three questions in a `question` column; ~3 crowd ratings per item, trusted on half the items."""
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
interval: {{n_boot: {{n_boot}}}}
store: {{url: "sqlite:///{(folder / 'results.db').as_posix()}"}}
reports: {{dir: "{(folder / 'reports').as_posix()}"}}
""", encoding="utf-8")
    return batch, trusted, config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgements", type=int, default=100_000)
    parser.add_argument("--n-boot", type=int, default=2000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from prefect import flow

    @flow
    def trivial() -> int:
        return 1

    start = time.perf_counter()
    trivial()
    startup = time.perf_counter() - start
    start = time.perf_counter()
    trivial()
    flow_overhead = time.perf_counter() - start

    from labelgate.flows.gate import run_gate_flow

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        batch, trusted, config = make_data(folder, args.judgements)
        config.write_text(config.read_text().replace("{n_boot}", str(args.n_boot)), encoding="utf-8")
        rows = sum(1 for _ in open(batch)) - 1 + sum(1 for _ in open(trusted)) - 1
        start = time.perf_counter()
        summary = run_gate_flow(str(config), batch=str(batch), trusted=str(trusted), force=True)
        gate_seconds = time.perf_counter() - start
    result = {"judgements": rows, "questions": 3, "n_boot": args.n_boot, "prefect_first_start_s": round(startup, 2),
              "prefect_flow_overhead_s": round(flow_overhead, 2), "gate_s": round(gate_seconds, 2),
              "gate_steps_s": summary.get("timing", {}), "decision": summary["decision"],
              "target_s": TARGET_SECONDS, "pass": gate_seconds <= TARGET_SECONDS}
    print(f"Prefect first start (ephemeral API): {startup:.1f} s; a further trivial flow: {flow_overhead:.2f} s")
    print(f"gate on {rows} judgements, 3 questions, n_boot={args.n_boot}: {gate_seconds:.1f} s "
          f"({'PASS' if result['pass'] else 'FAIL'} against {TARGET_SECONDS:.0f} s) — decision {summary['decision']}")
    for step, seconds in (summary.get("timing") or {}).items():
        print(f"  {step:<10} {seconds:.2f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
