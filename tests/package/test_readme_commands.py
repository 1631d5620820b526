"""The shell commands of README.md and docs/monitoring.md run as written, in a copy of the repository's tracked files.

Every ``bash`` block of those files is marked on the line above it: ``<!-- commands-test: run -->`` (the test runs
it) or ``<!-- commands-test: skip: <why> -->`` (it needs what a test cannot have: a server, a secret, a schedule that
runs until stopped, the user's own files). A block without a mark fails the test, so a new command cannot escape it.

Each line of a run block is one command, run from the copy's root with ``bash -c`` in order; it must exit with the
code its trailing comment states (``exit N``, as in ``# REJECT (exit 1)``), else 0. ``.venv/bin/labelgate`` is the
``labelgate`` of the Python running the tests. The README's commands run "after ``make demo``": the test writes the
demo's data the way ``labelgate demo`` does (:func:`labelgate.cli.main.write_synthetic`, seed 7, 2,000 items) instead
of gating its two batches, which the demo's own tests do.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", "docs/monitoring.md")
MARK = re.compile(r"<!--\s*commands-test:\s*(run|skip:[^>]*\S)\s*-->")
EXIT = re.compile(r"#.*\bexit (\d)\b")
#: Seconds one command may take on a loaded machine (a gate with its bootstrap is the slowest, a few seconds alone).
COMMAND_TIMEOUT = 240


def blocks(document: str) -> list[tuple[str, int, str]]:
    """``(mark, line number, body)`` of every bash block of a document (mark "" when the line above has none)."""
    lines = (ROOT / document).read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```bash":
            above = next((line for line in reversed(lines[:i]) if line.strip()), "")
            mark = MARK.search(above)
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            found.append((mark.group(1) if mark else "", i + 1, "\n".join(lines[i + 1:end])))
            i = end
        i += 1
    return found


def commands(body: str) -> list[tuple[str, int]]:
    """The command lines of a block with the exit code each must give."""
    out = []
    for line in body.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            code = EXIT.search(line)
            out.append((line, int(code.group(1)) if code else 0))
    return out


def test_every_bash_block_is_marked_run_or_skipped_with_a_reason():
    unmarked = [f"{doc}:{line}" for doc in DOCUMENTS for mark, line, _ in blocks(doc) if not mark]
    assert not unmarked, f"bash blocks without a commands-test mark: {unmarked}"
    assert sum(mark == "run" for doc in DOCUMENTS for mark, _, _ in blocks(doc)) >= 3


def test_the_exit_comments_are_read():
    assert commands("a --json   # REJECT (exit 1)\n# a note\nb\n") == [("a --json   # REJECT (exit 1)", 1), ("b", 0)]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tracked files (as they are in the work tree), a ``.venv/bin/labelgate`` of this Python, the demo's data."""
    from labelgate.cli.main import write_synthetic

    copy = tmp_path_factory.mktemp("clone")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).is_file() and name.split("/")[0] in ("configs", "flows", "README.md", "docs"):
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    shim = copy / ".venv" / "bin" / "labelgate"
    shim.parent.mkdir(parents=True)
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m labelgate "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    for scenario in ("good", "contentment"):  # what `make demo` writes (labelgate demo: data/<scenario>/, seed 7)
        write_synthetic(copy / "labelgate-demo" / "data" / scenario, scenario, 2000, seed=7)
    return copy


def _environment(home: Path) -> dict[str, str]:
    """A user who named no Prefect API (no PREFECT_* variable, an empty Prefect home: no profile names one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(home)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return env


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_commands_run_as_written_and_exit_as_stated(clone: Path, document: str, tmp_path: Path):
    env = _environment(tmp_path / "prefect-home")
    ran = 0
    for mark, line, body in blocks(document):
        if mark != "run":
            continue
        for command, expected in commands(body):
            done = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT, check=False)
            assert done.returncode == expected, (
                f"{document}:{line}: `{command}` exited {done.returncode}, expected {expected}\n"
                f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}")
            ran += 1
    assert ran or document != "README.md"
    # `git status` stays clean: everything the commands wrote is under the ignored folders
    stray = [p.relative_to(clone).as_posix() for p in clone.rglob("*") if p.is_file()
             and p.relative_to(clone).parts[0] not in ("labelgate-demo", ".venv")
             and not (ROOT / p.relative_to(clone)).is_file()]
    assert not stray, f"files written outside labelgate-demo/: {stray}"
    assert {"/labelgate-demo/", "/.venv/"} <= _ignored()


def _ignored() -> set[str]:
    """The root-anchored folders .gitignore ignores (``/x/`` or ``x/``), as ``/x/``."""
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    return {"/" + line.strip().strip("/") + "/" for line in lines if line.strip().endswith("/")}
