"""One direction of dependency: the numpy core imports no pandas, GX, Prefect or pandera, and no upper layer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "labelgate"
CORE = [*sorted((SRC / "metrics").glob("*.py")), SRC / "ratings.py", SRC / "errors.py", SRC / "estimate.py"]
FORBIDDEN = ("pandas", "great_expectations", "prefect", "pandera", "sqlalchemy", "typer")
UPPER = ("labelgate.expectations", "labelgate.flows", "labelgate.cli", "labelgate.gate", "labelgate.monitor",
         "labelgate.store", "labelgate.io", "labelgate.validation", "labelgate.report")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_core_module_imports_only_numpy_scipy_and_the_core(path):
    bad = sorted(m for m in imported_modules(path)
                 if m.split(".")[0] in FORBIDDEN or any(m == u or m.startswith(u + ".") for u in UPPER))
    assert bad == [], f"{path.name} imports {bad}"


def test_the_check_sees_a_forbidden_import(tmp_path):
    module = tmp_path / "bad.py"
    module.write_text("import numpy as np\nfrom pandas import DataFrame\nfrom labelgate.flows import gate\n")
    assert {"pandas", "labelgate.flows"} <= imported_modules(module)
