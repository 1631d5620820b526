"""``make bench``: run the benchmark set, each script in its own process, and write the table of docs/benchmarks.md.

Every script of the set times paired, interleaved rounds and prints its ratios as

    RATIO <measured> / <reference> (<clock>): <median>x (<min>–<max>)[  target <= <X>x: meets|MISSES]

(``bench_routes.ratio_line``), and each absolute figure that has a limit as

    LIMIT <measured> (<clock>): <median> s (<min>–<max>)  target <= <X> s: meets|MISSES

(``bench_routes.limit_line``). This runner collects those lines, in the order printed, and replaces what lies between
the two marker comments of docs/benchmarks.md (``<!-- bench:begin -->`` … ``<!-- bench:end -->``) with: the machine,
the load average at the start and the end, the wall time of the run, one table row per ratio (script, ratio, median,
spread, target, verdict) and each script's whole output. Nothing outside the markers is touched. It prints the wall
time of the whole run. Exit status 1 when a script failed, timed out or printed no ratio (the table then says so);
a missed target is a row of the table, not a failure of the run.

Run: ``python benchmarks/run.py [--only bench_icc,bench_gate] [--doc docs/benchmarks.md] [--no-write]``.
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
RATIO = re.compile(r"^\s*RATIO (?P<what>.+?): (?P<median>[0-9.]+)x \((?P<low>[0-9.]+)–(?P<high>[0-9.]+)\)"
                   r"(?:\s+target (?P<op><=|>=) (?P<target>[0-9.]+)x: (?P<verdict>meets|MISSES))?\s*$")
LIMIT = re.compile(r"^\s*LIMIT (?P<what>.+?): (?P<median>[0-9.]+) s \((?P<low>[0-9.]+)–(?P<high>[0-9.]+)\)"
                   r"\s+target (?P<op><=) (?P<target>[0-9.]+) s: (?P<verdict>meets|MISSES)\s*$")


@dataclass(frozen=True)
class Script:
    """One benchmark of the set: its arguments (sizes chosen for the 15-minute budget) and a time limit."""

    name: str
    args: tuple[str, ...]
    timeout: float
    what: str


# The set and its sizes (docs/benchmarks.md, "make bench"): 13.4 min with 10^7 for Dask and 7 start-up rounds at load
# average 8-11 on the 2-core machine, hence 5*10^6 and 5 rounds, to stay within 15 minutes under that load.
SET: tuple[Script, ...] = (
    Script("bench_routes.py", ("--rounds", "5", "--cold-n", "1000000,5000000"), 600,
           "from a table to the numbers: Ratings routes vs read_csv and the peers' hand and usual routes, "
           "10^6 judgements per pool, warm and cold; cold processes also on a table of 10^7 judgements"),
    Script("bench_startup.py", ("--rounds", "5"), 240,
           "what a user starts, fresh processes: import, --help, early errors, a stored-decision rerun"),
    Script("bench_gate.py", ("--rounds", "3"), 540,
           "`labelgate gate` on the demo configuration as a subprocess vs reading its input, the library route, "
           "the same gate through the Python API, the gate as a Prefect flow and Prefect's start-up"),
    Script("bench_icc.py", ("--items", "1000", "--rounds", "3"), 300,
           "ICC end to end vs pingouin (usual and integer-id routes) and a hand numpy route, warm and cold"),
    # the sizes: spans 1.2*10^8 unit judgements (peak 4.9 GB), boxes 3*10^6; ~100 s of CPU on a quiet machine
    Script("bench_kinds.py", ("--docs", "10000", "--images", "100000", "--sets", "1000000", "--rounds", "3"), 720,
           "multi-label sets (10^6 judgements), text spans (10^4 documents x 2,000 characters x 3+3 raters) and "
           "image boxes (10^5 images x 5 boxes x 3+3 raters): building the pools and the panel vs pd.read_csv"),
    Script("bench_dask.py", ("--rows", "1000000", "5000000", "--rounds", "3", "--n-boot", "0"), 480,
           "Dask (2-worker LocalCluster) vs in-memory at 10^6 and 5*10^6 judgements, fresh processes; the crossover"),
)


@dataclass
class Result:
    """What one script printed, how long it took and whether it finished."""

    script: Script
    output: str
    seconds: float
    status: str  # "ok", "failed (exit N)", "timed out"
    ratios: list[dict[str, str]] = field(default_factory=list)


def parse_ratios(output: str) -> list[dict[str, str]]:
    """The ``RATIO`` and ``LIMIT`` lines of a script's output, in order: what, median, low, high, (if judged) op,
    target, verdict, and the unit (``x`` for a ratio, `` s`` for a limit in seconds)."""
    rows = []
    for line in output.splitlines():
        for pattern, unit in ((RATIO, "x"), (LIMIT, " s")):
            match = pattern.match(line)
            if match:
                rows.append({k: v or "" for k, v in match.groupdict().items()} | {"unit": unit})
    return rows


def local_paths(line: str) -> str:
    """``line`` with this machine's paths replaced (the repository → ``.``, the temporary directory → ``$TMPDIR``,
    the home directory → ``~``): the generated table is repository text, which names no path of one machine."""
    for path, name in ((str(ROOT), "."), (tempfile.gettempdir(), "$TMPDIR"), (str(Path.home()), "~")):
        if len(path) > 1:
            line = line.replace(path, name)
    return line


def run_script(script: Script) -> Result:
    """Run one script in a fresh interpreter (one BLAS thread), echoing its output as it comes."""
    # as a user's install runs: modules load from their bytecode cache (a shell exporting PYTHONDONTWRITEBYTECODE
    # would make every fresh process compile the package from source, which no installed package does)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
           "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    compileall.compile_dir(ROOT / "src" / "labelgate", quiet=1)
    cmd = [sys.executable, str(ROOT / "benchmarks" / script.name), *script.args]
    print(f"\n$ python benchmarks/{script.name} {' '.join(script.args)}", flush=True)
    start = time.perf_counter()
    lines: list[str] = []
    timed_out = threading.Event()
    # its own process group: on the time limit the script and the processes it started (gate runs, a Dask
    # cluster) are stopped together
    with tempfile.TemporaryFile("w+") as errors, subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=errors, text=True, cwd=ROOT, env=env, start_new_session=True) as proc:
        assert proc.stdout is not None

        def stop() -> None:
            timed_out.set()
            os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(script.timeout, stop)
        timer.start()
        try:
            for line in proc.stdout:
                if line.startswith("{"):  # bench_dask's per-run JSON records: kept out of the table and the echo
                    continue
                lines.append(local_paths(line.rstrip("\n")))
                print(line, end="", flush=True)
            code = proc.wait()
        finally:
            timer.cancel()
        status = "timed out" if timed_out.is_set() else "ok" if code == 0 else f"failed (exit {code})"
        if status != "ok":  # the end of stderr says why (warnings of a run that finished are left out)
            errors.seek(0)
            lines += [f"stderr: {line}" for line in errors.read().splitlines()[-8:]]
            print("\n".join(lines[-8:]), flush=True)
    output = "\n".join(lines)
    return Result(script, output, time.perf_counter() - start, status, parse_ratios(output))


def table(results: list[Result]) -> list[str]:
    """One markdown row per ``RATIO`` or ``LIMIT`` line; a script that failed or printed none gets a row saying so."""
    rows = ["| script | ratio (measured / reference, clock) or limit (measured, clock) | median | spread (min–max) "
            "| target | verdict |",
            "| --- | --- | --- | --- | --- | --- |"]
    for result in results:
        if result.status != "ok" or not result.ratios:
            rows.append(f"| `{result.script.name}` | {result.status if result.status != 'ok' else 'no RATIO line'} "
                        "| | | | **FAILED** |")
        for ratio in result.ratios:
            unit = ratio.get("unit", "x")
            target = f"{ratio['op']} {ratio['target']}{unit}" if ratio["target"] else "—"
            verdict = {"meets": "meets", "MISSES": "**MISSES**"}.get(ratio["verdict"], "")
            what = ratio["what"].replace("|", "\\|")
            rows.append(f"| `{result.script.name}` | {what} | {ratio['median']}{unit} | {ratio['low']}–{ratio['high']} "
                        f"| {target} | {verdict} |")
    return rows


def section(results: list[Result], started: datetime, load_start: tuple[float, ...], load_end: tuple[float, ...],
            seconds: float) -> str:
    """The generated text between the markers."""
    sizes = "; ".join(f"`{r.script.name} {' '.join(r.script.args)}` ({r.seconds:.0f} s, {r.status})" for r in results)
    judged = [ratio for r in results for ratio in r.ratios if ratio["verdict"]]
    missed = sum(ratio["verdict"] == "MISSES" for ratio in judged)
    head = [
        "<!-- Generated by `make bench` (benchmarks/run.py): edits between the markers are overwritten. -->",
        f"`make bench` on {started:%Y-%m-%d %H:%M} UTC; {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; load average at the start {' / '.join(f'{x:.2f}' for x in load_start)} "
        f"(1 / 5 / 15 min), at the end {' / '.join(f'{x:.2f}' for x in load_end)}; **wall time of the whole run "
        f"{seconds / 60:.1f} min**.",
        "",
        f"Scripts and sizes: {sizes}.",
        "",
        f"{len(judged)} figures have a target: {len(judged) - missed} met, {missed} missed. A ratio is the median of "
        "the per-round ratios of paired, interleaved rounds; the spread is their min–max; a limit (seconds) is the "
        "median of the rounds' times against an absolute target. Clock: `cpu` / `wall` in "
        "one process (warm), `process` a whole fresh process timed from outside (cold), `inside` the work timed "
        "inside a fresh process.",
        "",
        *table(results),
        "",
    ]
    for result in results:
        head += [f"<details><summary>Output of <code>benchmarks/{result.script.name}</code> — "
                 f"{result.script.what}</summary>", "", "```", result.output.strip(), "```", "", "</details>", ""]
    return "\n".join(head)


def write_section(doc: Path, text: str) -> None:
    """Replace what lies between the markers of ``doc`` with ``text`` (both markers must be there, once each)."""
    content = doc.read_text(encoding="utf-8")
    if content.count(BEGIN) != 1 or content.count(END) != 1 or content.index(BEGIN) > content.index(END):
        raise ValueError(f"{doc.name} must hold {BEGIN} and then {END}, once each")
    before, rest = content.split(BEGIN)
    _, after = rest.split(END)
    doc.write_text(f"{before}{BEGIN}\n{text.rstrip()}\n{END}{after}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated script names of the set (default: all)")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--no-write", action="store_true", help="print the section, leave the doc alone")
    args = parser.parse_args(argv)
    chosen = SET
    if args.only:
        wanted = {name if name.endswith(".py") else f"{name}.py" for name in args.only.split(",")}
        unknown = wanted - {s.name for s in SET}
        if unknown:
            parser.error(f"not in the set: {', '.join(sorted(unknown))} (the set: {', '.join(s.name for s in SET)})")
        chosen = tuple(s for s in SET if s.name in wanted)
    started, load_start = datetime.now(UTC), os.getloadavg()
    print(f"# make bench: {len(chosen)} scripts; load average at start {load_start[0]:.2f} {load_start[1]:.2f} "
          f"{load_start[2]:.2f}", flush=True)
    clock = time.perf_counter()
    results = [run_script(script) for script in chosen]
    seconds = time.perf_counter() - clock
    text = section(results, started, load_start, os.getloadavg(), seconds)
    if args.no_write:
        print(text)
    else:
        write_section(args.doc, text)
        print(f"\nwrote the table to {args.doc.name}")
    print(f"wall time of the whole run: {seconds:.0f} s ({seconds / 60:.1f} min)")
    return 0 if all(r.status == "ok" and r.ratios for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
