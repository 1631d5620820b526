"""The tree is the design: every layer imports only the layers before it, and no modules import each other in a cycle.

Layers, bottom to top (README, "Architecture"):

    errors, _version → extras → core → metrics → sqlagg → gx | pipeline → gate | monitor → reporting → flows → cli

Layers on one line separated by ``|`` are siblings: neither imports the other. Every import counts, also one inside
a function or under ``TYPE_CHECKING`` and ``importlib.import_module("labelgate....")`` with a literal name.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from labelgate.extras import MODULE_EXTRA

SRC = Path(__file__).resolve().parents[2] / "src" / "labelgate"

LAYERS: list[tuple[str, ...]] = [
    ("labelgate._version", "labelgate.errors"),
    ("labelgate.extras",),
    ("labelgate.core",),
    ("labelgate.metrics",),
    ("labelgate.sqlagg",),
    ("labelgate.gx", "labelgate.pipeline"),
    ("labelgate.gate", "labelgate.monitor"),
    ("labelgate.reporting",),
    ("labelgate.flows",),
    ("labelgate.cli",),
]
# The package's own entry points sit above everything they re-export.
ENTRY_POINTS = {"labelgate": 3, "labelgate.__main__": len(LAYERS)}
# The deliberate exceptions: ``lg.expectations`` imports ``labelgate.gx`` on first access (module __getattr__),
# so that ``import labelgate`` stays free of Great Expectations while the old attribute keeps working.
ALLOWED = {("labelgate", "labelgate.gx"),
           # likewise ``lg.read_label_studio`` imports the Label Studio reader (pipeline) on first access
           ("labelgate", "labelgate.pipeline.sources.label_studio")}

# Third-party packages a layer must not import at all (the lower layers stay light and Prefect-free): pandas and
# typer, and every module an optional extra brings (``labelgate.extras`` is the one list of them). The core and the
# metrics import none of them, not even inside a function: what needs an extra asks ``labelgate.extras``, which looks
# modules up without importing them.
HEAVY = ("pandas", "typer", *sorted(MODULE_EXTRA))
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "labelgate.errors": (*HEAVY, "scipy"),
    "labelgate._version": (*HEAVY, "scipy", "numpy"),
    "labelgate.extras": (*HEAVY, "scipy", "numpy"),
    "labelgate.core": HEAVY,
    "labelgate.metrics": HEAVY,
    # the aggregate plan's SQL backend, and PostgreSQL's COPY for its arrays
    "labelgate.sqlagg": tuple(p for p in HEAVY if p not in ("sqlalchemy", "psycopg")),
    "labelgate.gx": ("prefect", "prefect_dask", "typer"),
    "labelgate.gate": ("prefect", "prefect_dask", "typer"),
    "labelgate.monitor": ("prefect", "prefect_dask", "typer"),
    "labelgate.reporting": ("prefect", "prefect_dask", "typer", "great_expectations"),
}
# Imported only inside functions (so that importing the module stays cheap).
LAZY_ONLY: dict[str, tuple[str, ...]] = {
    "labelgate.core": ("scipy",),
    "labelgate.sqlagg": ("sqlalchemy",),  # the aggregate plan's SQL backend: `import labelgate.sqlagg` stays light
    "labelgate.pipeline": ("prefect", "prefect_dask", "dask", "great_expectations"),
    "labelgate.gx": ("sqlalchemy", "pyspark"),  # the SQL / Spark providers only: `import labelgate.gx` stays light
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(path: Path) -> list[tuple[str, bool]]:
    """``(module, at_module_level)`` for every import in the file (``from a import b`` yields ``a`` and ``a.b``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module, is_package = module_name(path), path.name == "__init__.py"
    top_level = {id(node) for node in tree.body}
    top_level |= {id(n) for node in tree.body if isinstance(node, ast.If | ast.Try) for n in ast.walk(node)}
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        at_top = id(node) in top_level
        if isinstance(node, ast.Import):
            found += [(alias.name, at_top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, module, is_package)
            found.append((base, at_top))
            found += [(f"{base}.{alias.name}", at_top) for alias in node.names if alias.name != "*"]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.args[0].value, False))
    return found


def source_files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def known_modules() -> set[str]:
    return {module_name(p) for p in source_files()}


def layer_of(module: str) -> int | None:
    if module in ENTRY_POINTS:
        return ENTRY_POINTS[module]
    for index, names in enumerate(LAYERS):
        if any(module == n or module.startswith(n + ".") for n in names):
            return index
    return None


def group_of(module: str) -> str | None:
    for names in LAYERS:
        for n in names:
            if module == n or module.startswith(n + "."):
                return n
    return None


def internal_edges(files: Iterable[Path], modules: set[str]) -> dict[str, set[str]]:
    """Module → the project modules it imports (``from pkg import name`` counts as ``pkg.name`` when that exists)."""
    edges: dict[str, set[str]] = {}
    for path in files:
        name = module_name(path)
        targets = set()
        imported_names = {imported for imported, _ in imports_of(path)}
        for imported in imported_names:
            if imported.split(".")[0] != "labelgate":
                continue
            if imported not in modules and imported.rsplit(".", 1)[0] in modules:
                imported = imported.rsplit(".", 1)[0]  # `from pkg.mod import name`: the module pkg.mod
            elif any(other.startswith(imported + ".") and other in modules for other in imported_names):
                continue  # `from pkg import mod`: the module pkg.mod, not the package pkg
            if imported in modules and imported != name:
                targets.add(imported)
        edges[name] = targets
    return edges


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, targets in edges.items():
        source_layer, source_group = layer_of(source), group_of(source)
        if source_layer is None:
            bad.append(f"{source} belongs to no layer")
            continue
        for target in targets - {t for s, t in ALLOWED if s == source}:
            target_layer = layer_of(target)
            if target_layer is None:
                bad.append(f"{source} imports {target}, which belongs to no layer")
            elif target_layer > source_layer:
                bad.append(f"{source} imports {target} (upward)")
            elif target_layer == source_layer and group_of(target) != source_group and source not in ENTRY_POINTS:
                bad.append(f"{source} imports its sibling layer {target}")
            elif target == "labelgate" and source != "labelgate.__main__":
                bad.append(f"{source} imports the package's top level")
    return sorted(bad)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            # a package's __init__ re-exporting its own modules is not a cycle of the design
            if v.startswith(w + "."):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def third_party_violations(path: Path) -> list[str]:
    module = module_name(path)
    group = group_of(module) or module
    bad = []
    for imported, at_top in imports_of(path):
        top = imported.split(".")[0]
        if top in FORBIDDEN.get(group, ()):
            bad.append(f"{module} imports {imported}")
        elif at_top and top in LAZY_ONLY.get(group, ()):
            bad.append(f"{module} imports {imported} at module level (import it where it is used)")
    return bad


def test_every_module_imports_only_the_layers_before_it():
    edges = internal_edges(source_files(), known_modules())
    assert layer_violations(edges) == []


def test_no_import_cycles():
    edges = internal_edges(source_files(), known_modules())
    assert cycles(edges) == []


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(SRC)))
def test_layer_imports_only_its_third_party_packages(path):
    assert third_party_violations(path) == []


# ------------------------------------------------------------------------------ the checks can fail
def _tree(tmp_path: Path, files: dict[str, str]) -> tuple[list[Path], set[str]]:
    paths = []
    for name, text in files.items():
        path = tmp_path / "labelgate" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(path)
    return paths, {module_name_in(tmp_path, p) for p in paths}


def module_name_in(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_the_checks_see_an_upward_import_a_sibling_import_and_a_cycle(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path / "labelgate")
    paths, modules = _tree(tmp_path, {
        "core/ratings.py": "import numpy as np\nfrom labelgate.flows import gate\n",
        "flows/gate.py": "def f():\n    from labelgate.cli import main\n",
        "cli/main.py": "import typer\n",
        "gate/steps.py": "from labelgate.monitor import engine\n",
        "monitor/engine.py": "x = 1\n",
        "metrics/a.py": "from labelgate.metrics import b\n",
        "metrics/b.py": "from . import a\n",
        "core/lazy.py": "import scipy.sparse\nimport pandas\n",
    })
    edges = internal_edges(paths, modules)
    violations = layer_violations(edges)
    assert "labelgate.core.ratings imports labelgate.flows.gate (upward)" in violations
    assert "labelgate.flows.gate imports labelgate.cli.main (upward)" in violations
    assert "labelgate.gate.steps imports its sibling layer labelgate.monitor.engine" in violations
    assert ["labelgate.metrics.a", "labelgate.metrics.b"] in cycles(edges)
    lazy = third_party_violations(tmp_path / "labelgate" / "core" / "lazy.py")
    assert any("pandas" in v for v in lazy) and any("at module level" in v for v in lazy)
