"""The served gate against the CLI: 8 batches of 10^4 crowd judgements each (plus the trusted pool in the file).

Per round, on fresh stores (no decision is reused): **served** — a running, warmed-up `labelgate serve` (its
first batch gated before the clock starts); the 8 files are dropped (written hidden, then renamed: atomic) and the
time runs until the ledger says the last one is decided. **CLI** — `labelgate gate` run 8 times in turn on the
same files (each run starts Python, Prefect's local API and the gate, as a user's script would). Rounds alternate
the order of the two; the medians and the median of the per-round ratios are printed. Target (issue 19): ≥ 5×.

Run: ``python benchmarks/bench_serve.py [--rounds 3] [--judgements 10000] [--n-boot 2000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
SERVE_APP = "import typer; from labelgate.cli.serve import register; app = typer.Typer(); register(app); app()"
SCENARIOS = [("good", 1), ("good", 2), ("good", 5), ("good", 7), ("contentment", 3), ("contentment", 4),
             ("contentment", 6), ("good", 11)]


def make_batches(folder: Path, judgements: int) -> list[Path]:
    from labelgate.pipeline.synth import scenario_named, simulate

    folder.mkdir(parents=True)
    paths = []
    for k, (name, seed) in enumerate(SCENARIOS):
        frame = simulate(scenario_named(name, judgements // 3), seed=seed)  # 3 crowd judgements per item
        path = folder / f"b{k}-{name}{seed}.csv"
        frame.to_csv(path, index=False)
        paths.append(path)
    return paths


def write_config(root: Path, n_boot: int) -> Path:
    config = {"gates": [{"type": "normalized_cross_kappa", "min_value": 0.8}, {"type": "irr_baseline",
                                                                                "tolerance": 0.1}],
              "interval": {"n_boot": n_boot, "seed": 0}, "store": {"url": f"sqlite:///{root / 'results.db'}"},
              "reports": {"dir": str(root / "reports")},
              "serve": {"watch": str(root / "drop"), "settle_seconds": 0, "poll_seconds": 0.1}}
    (root / "drop").mkdir(parents=True)
    path = root / "gate.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def done(state: Path) -> int:
    try:
        with sqlite3.connect(f"file:{state}?mode=ro", uri=True, timeout=10) as db:
            return db.execute("SELECT count(*) FROM serve_files WHERE status = 'done'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def drop(path: Path, folder: Path) -> None:
    hidden = folder / f".{path.name}"
    shutil.copyfile(path, hidden)
    os.replace(hidden, folder / path.name)  # the listing skips hidden files: the batch appears whole


def wait_done(state: Path, count: int, server: subprocess.Popen, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while done(state) < count:
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the served gate stopped or timed out; see {state.parent.parent / 'serve.log'}")
        time.sleep(0.02)


def served(root: Path, batches: list[Path], warmup: Path, n_boot: int, env: dict[str, str]) -> float:
    config = write_config(root, n_boot)
    state = root / "reports" / "labelgate-serve.db"
    with open(root / "serve.log", "w") as log:
        server = subprocess.Popen([sys.executable, "-c", SERVE_APP, "serve", "--config", str(config)], env=env,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            drop(warmup, root / "drop")  # imports, the store and GX warmed up before the clock starts
            wait_done(state, 1, server)
            start = time.perf_counter()
            for path in batches:
                drop(path, root / "drop")
            wait_done(state, 1 + len(batches), server)
            return time.perf_counter() - start
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=120)


def cli(root: Path, batches: list[Path], n_boot: int, env: dict[str, str]) -> float:
    config = write_config(root, n_boot)
    start = time.perf_counter()
    for path in batches:
        out = subprocess.run([str(BIN / "labelgate"), "gate", "--batch", str(path), "--config", str(config),
                              "--json"], env=env, capture_output=True, text=True, timeout=1800)
        if out.returncode not in (0, 1, 2):
            raise RuntimeError(f"labelgate gate failed on {path.name}: {out.stderr[-2000:]}")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--judgements", type=int, default=10_000, help="crowd judgements per batch")
    parser.add_argument("--n-boot", type=int, default=2000)
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # as a user without a server runs it
    env.update(OPENBLAS_NUM_THREADS="1", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        base = Path(tmp)
        batches = make_batches(base / "data", args.judgements)
        warmup = make_batches(base / "warmup", args.judgements // 4)[0]
        served_s, cli_s, ratios = [], [], []
        for r in range(args.rounds):
            order = ("served", "cli") if r % 2 == 0 else ("cli", "served")
            times = {}
            for mode in order:
                root = base / f"round{r}-{mode}"
                times[mode] = (served(root, batches, warmup, args.n_boot, env) if mode == "served"
                               else cli(root, batches, args.n_boot, env))
            served_s.append(times["served"])
            cli_s.append(times["cli"])
            ratios.append(times["cli"] / times["served"])
            print(f"round {r + 1}: served {times['served']:.1f} s, CLI {times['cli']:.1f} s, "
                  f"ratio {ratios[-1]:.1f}x", flush=True)
    print(f"8 batches x {args.judgements} judgements, n_boot {args.n_boot}, {args.rounds} paired rounds: served "
          f"(warm `labelgate serve`, drop to last decision) median {statistics.median(served_s):.1f} s; 8 sequential "
          f"`labelgate gate` median {statistics.median(cli_s):.1f} s; ratio median {statistics.median(ratios):.1f}x "
          f"(target >= 5x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
