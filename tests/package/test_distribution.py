"""The distribution a user installs: the wheel's metadata, and the wheel installed into clean virtualenvs.

``pip install labelgate`` must bring the numerical core and ``labelgate metrics`` only (no Great Expectations,
Prefect, SQLAlchemy, FastAPI or pandera); ``labelgate[gate]`` must install into an environment that already holds
pandas 2.2 and numpy 2.0 without moving them and gate the demo data there; ``labelgate[gx]`` must register the
expectations. The wheel is built once per test session; the virtualenvs are made with uv (a test tool of the
``dev`` extra, pinned by the lock) from the package registry, as a user's installer would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# what the core must not bring (pydantic may come: recent typer releases depend on it)
HEAVY = ("great-expectations", "prefect", "sqlalchemy", "fastapi", "pandera", "jinja2", "pyarrow")
EXTRAS = {"gx", "gate", "prefect", "postgres", "label-studio", "dask", "spark", "report", "all"}


def _uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if found is None:
        pytest.skip("uv is not installed (it comes with the dev extra: pip install -e '.[dev]')")
    return found


def _env() -> dict[str, str]:
    """A user's plain environment: no virtualenv or path of the test run leaks in, and no Prefect API is named."""
    # PYTHONDONTWRITEBYTECODE makes setuptools warn that it skips byte-compiling: not the package's warning
    return {k: v for k, v in os.environ.items()
            if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PREFECT_API_URL", "PYTHONDONTWRITEBYTECODE")
            and not k.startswith("PYTEST")}


def _run(args: list[str], cwd: Path, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {result.returncode}\n{result.stdout[-3000:]}\n"
                             f"{result.stderr[-3000:]}")
    return result


def _venv(uv: str, where: Path, *requirements: str) -> Path:
    """A fresh virtualenv at ``where`` with ``requirements`` installed; returns its ``bin`` folder."""
    _run([uv, "venv", "-q", "--python", sys.executable, str(where)], cwd=where.parent)
    if requirements:
        result = _run([uv, "pip", "install", "-q", "--python", str(where / "bin" / "python"), *requirements],
                      cwd=where.parent, check=False)
        if result.returncode != 0 and re.search(r"(?i)(failed to fetch|connect|dns|network)", result.stderr):
            pytest.skip(f"the package registry cannot be reached: {result.stderr.strip().splitlines()[-1]}")
        assert result.returncode == 0, result.stderr[-3000:]
    return where / "bin"


def _installed(bin_dir: Path) -> dict[str, str]:
    out = _run([str(bin_dir / "python"), "-c",
                "import json, importlib.metadata as m; print(json.dumps({d.metadata['Name'].lower().replace('_', '-'):"
                " d.version for d in m.distributions()}))"], cwd=bin_dir)
    return json.loads(out.stdout)


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel, built once from this checkout with ``python -m build`` (its output kept)."""
    out = tmp_path_factory.mktemp("dist")
    result = _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out)
    (out / "build.log").write_text(result.stdout + result.stderr, encoding="utf-8")
    wheel, = out.glob("labelgate-*.whl")
    sdist, = out.glob("labelgate-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist, "log": out / "build.log"}


def _metadata(wheel: Path) -> list[tuple[str, str]]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode("utf-8")
    header = text.split("\n\n", 1)[0]
    return [(k, v.strip()) for k, _, v in (line.partition(":") for line in header.splitlines()) if v]


def test_the_build_prints_no_warning_and_twine_accepts_it(dist: dict[str, Path]) -> None:
    log = dist["log"].read_text(encoding="utf-8")
    assert not re.search(r"(?im)^.*(warning|deprecat).*$", log), re.findall(r"(?im)^.*(?:warning|deprecat).*$", log)
    twine = shutil.which("twine", path=str(Path(sys.executable).parent)) or shutil.which("twine")
    if twine is None:
        pytest.skip("twine is not installed (it comes with the dev extra)")
    result = _run([twine, "check", "--strict", str(dist["wheel"]), str(dist["sdist"])], cwd=dist["wheel"].parent)
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_the_metadata_states_ranges_and_the_extras(dist: dict[str, Path]) -> None:
    fields = _metadata(dist["wheel"])
    requires = [v for k, v in fields if k == "Requires-Dist"]
    pinned = [r for r in requires if "==" in r.split(";")[0]]  # the marker's `extra == "gx"` is not a pin
    assert requires and not pinned, pinned
    assert dict(fields)["Requires-Python"] == ">=3.11"
    assert EXTRAS <= {v for k, v in fields if k == "Provides-Extra"}
    import labelgate

    assert dict(fields)["Version"] == labelgate.__version__
    core = [r for r in requires if "extra ==" not in r]
    assert sorted(re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in core) == [  # type: ignore[union-attr]
        "numpy", "pandas", "scipy", "typer"]


def test_the_core_wheel_computes_the_panel_without_any_extra(dist: dict[str, Path], tmp_path: Path) -> None:
    bin_dir = _venv(_uv(), tmp_path / "core", str(dist["wheel"]))
    installed = _installed(bin_dir)
    assert not [name for name in HEAVY if name in installed], sorted(installed)
    version = _run([str(bin_dir / "labelgate"), "--version"], cwd=tmp_path)
    assert version.stdout.strip() == f"labelgate {_installed(bin_dir)['labelgate']}"
    script = (
        "import labelgate as lg, pandas as pd\n"
        "rows = [(i, r, (i + (r == 'c')) % 3, 'crowd' if r in 'abc' else 'trusted') for i in range(40)"
        " for r in 'abcxyz']\n"
        "table = pd.DataFrame(rows, columns=['item_id', 'rater_id', 'label', 'pool'])\n"
        "pools = lg.ratings_by_pool(table, pool='pool', item='item_id', rater='rater_id', value='label')\n"
        "k = lg.cross_kappa(pools['crowd'], pools['trusted'])\n"
        "from labelgate.metrics.panel import metrics_panel\n"
        "panel = metrics_panel(pools, ci=None)\n"
        "print(round(float(k.value), 6), sorted(panel))\n"
        "table.to_csv('two_pools.csv', index=False)\n"
        "import sys; print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('great_expectations', 'prefect', 'sqlalchemy', 'pandera')))\n")
    out = _run([str(bin_dir / "python"), "-c", script], cwd=tmp_path).stdout.splitlines()
    value = float(out[0].split()[0])
    assert -1 <= value <= 1 and "crowd" in out[0]
    assert out[1] == "[]"
    metrics = _run([str(bin_dir / "labelgate"), "metrics", "two_pools.csv", "--json", "--n-boot", "50"], cwd=tmp_path)
    panel = json.loads(metrics.stdout)
    assert {"crowd", "trusted"} <= set(panel)
    # a command whose extra is missing names the extra in one line, never a traceback
    gate = _run([str(bin_dir / "labelgate"), "gate", "--config", "gate.yaml", "--batch", "two_pools.csv"],
                cwd=tmp_path, check=False)
    assert gate.returncode == 3, gate.stderr
    assert "Traceback" not in gate.stderr and "labelgate[gate]" in gate.stderr, gate.stderr


def test_the_gate_extra_keeps_pandas_and_numpy_and_decides_the_demo(dist: dict[str, Path], tmp_path: Path) -> None:
    uv = _uv()
    bin_dir = _venv(uv, tmp_path / "team", "numpy==2.0.*", "pandas==2.2.*")
    before = _installed(bin_dir)
    result = _run([uv, "pip", "install", "-q", "--python", str(bin_dir / "python"), f"{dist['wheel']}[gate]"],
                  cwd=tmp_path)
    after = _installed(bin_dir)
    assert (after["numpy"], after["pandas"]) == (before["numpy"], before["pandas"]), result.stderr
    assert after["numpy"].startswith("2.0.") and after["pandas"].startswith("2.2.")
    assert "prefect" not in after
    from labelgate.cli.main import DEMO_CONFIG  # the demo's gates, as `labelgate demo` writes them

    config = tmp_path / "gate.yaml"
    config.write_text(DEMO_CONFIG.format(store=(tmp_path / "results.db").as_posix(),
                                         reports=(tmp_path / "reports").as_posix(), n_boot=1000), encoding="utf-8")
    expected = {"good": (0, "ACCEPT"), "contentment": (1, "REJECT")}
    for scenario, (code, decision) in expected.items():
        _run([str(bin_dir / "labelgate"), "synth", "--scenario", scenario, "--n-items", "2000", "--seed", "7",
              "--out", scenario], cwd=tmp_path)
        gate = _run([str(bin_dir / "labelgate"), "gate", "--config", str(config), "--batch", f"{scenario}/batch.csv",
                     "--trusted", f"{scenario}/trusted.csv", "--batch-id", scenario, "--json"], cwd=tmp_path,
                    check=False)
        assert gate.returncode == code, gate.stdout + gate.stderr
        assert json.loads(gate.stdout)["decision"] == decision


def test_the_gx_extra_registers_the_expectations(dist: dict[str, Path], tmp_path: Path) -> None:
    bin_dir = _venv(_uv(), tmp_path / "gx", f"{dist['wheel']}[gx]")
    assert "prefect" not in _installed(bin_dir) and "pandera" not in _installed(bin_dir)
    script = ("import labelgate.gx\n"
              "from great_expectations.expectations.registry import get_expectation_impl\n"
              "print(get_expectation_impl('expect_normalized_cross_kappa_to_be_at_least').__name__)\n")
    out = _run([str(bin_dir / "python"), "-c", script], cwd=tmp_path)
    assert out.stdout.strip() == "ExpectNormalizedCrossKappaToBeAtLeast"
