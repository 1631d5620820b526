"""Write the requirements whose lowest versions CI tests: the package's ranges, and the test tools from the lock.

    python scripts/lowest_requirements.py EXTRA[,EXTRA...] > lowest.in
    python scripts/lowest_requirements.py --show EXTRA[,EXTRA...]     (the versions installed, for the log)
    uv pip compile --python-version 3.11 --resolution lowest-direct lowest.in -o lowest.txt

Every range of ``[project] dependencies`` and of the named extras (their ``labelgate[...]`` references followed)
is a direct requirement, so uv's ``lowest-direct`` resolution takes the lower bound the metadata states: the test
then proves it. The test tools and peers of the ``test`` extra are pinned to their versions in the lock
(``constraints.txt``): the low end varies what a user installs, not the tools that judge it.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_SELF = re.compile(r"^labelgate\[([^\]]+)\]$")
_LOWER = re.compile(r">=\s*([0-9][^,;\s]*)")


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(extras: list[str], project: dict) -> list[str]:
    """The base dependencies and those of ``extras``, with the package's references to its own extras followed."""
    optional = project.get("optional-dependencies", {})
    seen: set[str] = set()
    out = list(project.get("dependencies", []))
    todo = list(extras)
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        if extra not in optional:
            raise SystemExit(f"unknown extra {extra!r}; the package has {sorted(optional)}")
        seen.add(extra)
        for req in optional[extra]:
            match = _SELF.match(req.replace(" ", ""))
            if match:
                todo.extend(match.group(1).split(","))
            else:
                out.append(req)
    return out


def locked() -> dict[str, str]:
    """``{canonical name: "name==version"}`` of the lock."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            pins[canonical(line.split("==")[0])] = line
    return pins


def _release(text: str) -> tuple[str, ...]:
    """A version's release numbers without trailing zeros (``16`` and ``16.0.0`` are one release)."""
    parts = text.split("+")[0].split(".")
    while len(parts) > 1 and parts[-1] == "0":
        parts.pop()
    return tuple(parts)


def show(reqs: list[str]) -> None:
    """Print each direct requirement with the version installed in this environment, and say where it is above
    the lower bound (then the low end did not test that bound)."""
    from importlib.metadata import PackageNotFoundError, version

    for req in reqs:
        name = _NAME.match(req).group(1)  # type: ignore[union-attr]
        bound = _LOWER.search(req)
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = "not installed"
        above = bound is not None and _release(installed) != _release(bound.group(1))
        print(f"lowest: {req:<36} installed {installed}" + ("  (NOT the lower bound)" if above else ""))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--show"] and len(argv) == 2:
        project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        show(requirements([e for e in argv[1].split(",") if e], project))
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [_LOWER.sub(r"==\1", req) for req in requirements([e for e in argv[0].split(",") if e], project)]
    pins = locked()
    for req in project["optional-dependencies"]["test"]:
        name = canonical(_NAME.match(req).group(1))  # type: ignore[union-attr]
        if name not in pins:
            raise SystemExit(f"the test requirement {req!r} is not pinned in constraints.txt")
        lines.append(pins[name])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
