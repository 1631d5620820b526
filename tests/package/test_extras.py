"""Every third-party import of the package belongs to the core or to an extra, and ``labelgate.extras`` knows which.

The core (``pip install labelgate``) is numpy, scipy, pandas and typer (with click and rich, which typer brings).
Any other module the package imports must be owned by an extra in :data:`labelgate.extras.EXTRA_MODULES`, so that
a missing one is reported as "install labelgate[...]"; and every extra of ``pyproject.toml`` that installs code
must have its entry there, with a requirement that brings each of its modules.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

from labelgate import extras

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "labelgate"
CORE = {"numpy", "scipy", "pandas", "typer", "click", "rich"}
#: import name → the distribution that provides it, where the two differ
DISTRIBUTION = {"yaml": "pyyaml", "jinja2": "jinja2", "great_expectations": "great-expectations",
                "prefect_dask": "prefect-dask", "distributed": "dask"}
#: optional modules that no extra installs, imported where a message already names them when they are missing
OPTIONAL = {"zstandard": "`.zst` files: pandas names it when it reads one",
            "fsspec": "a drop folder given as a URL: the folder's error names fsspec and the filesystem's package"}
#: extras that name jobs made of other extras, and the contributors' tools
COMPOSITE = {"all", "test", "dev"}


def third_party_imports() -> dict[str, set[str]]:
    """``{top-level module: {files importing it}}`` over every import of the package, lazy ones included."""
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top != "labelgate" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(str(path.relative_to(SRC)))
    return found


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower().replace("_", "-") for r in requirements}  # type: ignore[union-attr]


def test_every_import_outside_the_core_is_owned_by_an_extra() -> None:
    unowned = {module: sorted(files) for module, files in third_party_imports().items()
               if module not in CORE | set(OPTIONAL) and extras.extra_for_module(module) is None}
    assert not unowned, f"imports that no extra owns (add them to labelgate.extras): {unowned}"


def test_the_core_dependencies_are_the_core_imports() -> None:
    assert _names(project()["dependencies"]) == {"numpy", "scipy", "pandas", "typer"}


@pytest.mark.parametrize("extra", sorted(extras.EXTRA_MODULES))
def test_each_extra_installs_the_modules_it_is_asked_for(extra: str) -> None:
    optional = project()["optional-dependencies"]
    assert extra in optional

    def brought(name: str, seen: set[str]) -> set[str]:
        out: set[str] = set()
        for req in optional[name]:
            inner = re.match(r"labelgate\[([^\]]+)\]", req)
            if inner:
                for other in inner.group(1).split(","):
                    if other not in seen:
                        out |= brought(other, seen | {other})
            else:
                out |= _names([req])
        return out

    distributions = brought(extra, {extra}) | ({"prefect"} if "prefect-dask" in brought(extra, {extra}) else set())
    for module in extras.EXTRA_MODULES[extra]:
        assert DISTRIBUTION.get(module, module).replace("_", "-") in distributions, (extra, module)


def test_every_installing_extra_is_known_to_the_helper() -> None:
    assert set(project()["optional-dependencies"]) - COMPOSITE == set(extras.EXTRA_MODULES)


def test_a_missing_module_is_reported_with_its_extra() -> None:
    error = extras.as_missing_extra(ModuleNotFoundError("No module named 'pandera'", name="pandera"), "labelgate gate")
    assert error is not None and error.extra == "gate" and error.hint == "pip install 'labelgate[gate]'"
    assert str(error) == "labelgate gate: the 'gate' extra is not installed (missing: pandera)"
    assert extras.as_missing_extra(ModuleNotFoundError("No module named 'numpy'", name="numpy"), "x") is None
    assert extras.as_missing_extra(ValueError("x"), "x") is None


def test_require_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = extras.importlib.util.find_spec
    monkeypatch.setattr(extras.importlib.util, "find_spec",
                        lambda name, *a: None if name == "prefect" else real(name, *a))
    with pytest.raises(extras.MissingExtraError, match=r"serve: the 'prefect' extra is not installed \(missing: prefect\)"):
        extras.require("prefect", "serve")
    extras.require("gx", "the expectations")  # installed in the test environment: no error
    with pytest.raises(ValueError, match="unknown extra"):
        extras.require("nonsense", "x")
