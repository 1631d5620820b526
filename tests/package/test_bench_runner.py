"""The benchmark runner (``benchmarks/run.py``, ``make bench``): parsing the ``RATIO`` lines, the table, and writing
only between the markers of docs/benchmarks.md. Nothing here is timed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    # loaded from their paths under private names; the scripts import their neighbours (timing, bench_routes)
    if str(BENCHMARKS) not in sys.path:
        sys.path.append(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"labelgate_bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


run = _load("run")

# lines as the scripts print them (bench_routes, bench_startup, bench_serve's ">=" form), with noise around
OUTPUT = """\
# bench_routes: 1,000,000 judgements per pool
  pd.read_csv one.csv                     1,000,235 rows cpu s median 0.057 (0.050–0.059)
  RATIO from_long(DataFrame) + full panel / pd.read_csv one.csv (cpu): 2.87x (2.53–3.31)  target <= 3x: meets
  RATIO Ratings.from_long(DataFrame) / pd.read_csv one.csv (cpu): 2.23x (1.99–5.72)
  RATIO cold: read_csv + ratings_by_pool + full panel / cold: read_csv(two.csv) (wall): 7.83x (4.88–10.66)  target <= 3x: MISSES
  RATIO served / cli (process): 15.70x (15.10–17.10)  target >= 5x: meets
  RATIO malformed line without numbers
"""


def test_parse_ratios_reads_every_ratio_line_in_order() -> None:
    rows = run.parse_ratios(OUTPUT)
    assert [r["what"] for r in rows] == [
        "from_long(DataFrame) + full panel / pd.read_csv one.csv (cpu)",
        "Ratings.from_long(DataFrame) / pd.read_csv one.csv (cpu)",
        "cold: read_csv + ratings_by_pool + full panel / cold: read_csv(two.csv) (wall)",
        "served / cli (process)",
    ]
    assert rows[0] | {} == {"what": rows[0]["what"], "median": "2.87", "low": "2.53", "high": "3.31", "op": "<=",
                            "target": "3", "verdict": "meets", "unit": "x"}
    assert (rows[1]["target"], rows[1]["verdict"]) == ("", "")
    assert (rows[2]["median"], rows[2]["verdict"]) == ("7.83", "MISSES")
    assert (rows[3]["op"], rows[3]["target"]) == (">=", "5")


def test_parse_ratios_reads_what_ratio_line_prints() -> None:
    """The runner's pattern and the scripts' one formatter (bench_routes.ratio_line) agree."""
    timing = _load("timing")
    times = {"a": {"process": [2.0, 4.0, 3.0]}, "b": {"process": [1.0, 1.0, 1.0]}}
    judged = timing.ratio_line(times, "a", "b", 2.5, clock="process")
    plain = timing.ratio_line(times, "b", "a", None, clock="process")
    rows = run.parse_ratios(f"{judged}\n{plain}")
    assert [(r["what"], r["median"], r["low"], r["high"], r["verdict"]) for r in rows] == [
        ("a / b (process)", "3.00", "2.00", "4.00", "MISSES"), ("b / a (process)", "0.33", "0.25", "0.50", "")]


def test_limit_lines_are_read_as_printed_and_become_rows_in_seconds() -> None:
    """Absolute limits (bench_routes.limit_line: the panel's coefficients warm, the gate beyond Prefect) are read
    next to the ratios, in the order printed, and their table rows carry seconds."""
    routes = _load("bench_routes")
    times = {"fleiss_kappa, one pool": {"cpu": [0.002, 0.001, 0.003]},
             "full panel, cold": {"cpu": [0.2, 0.15, 0.12]}}
    output = "\n".join([routes.limit_line(times, "fleiss_kappa, one pool", 0.005),
                         "  RATIO a / b (cpu): 1.50x (1.20–1.80)  target <= 3x: meets",
                         routes.limit_line(times, "full panel, cold", 0.1),
                         "  LIMIT malformed line without a target: 0.1 s (0.1–0.2)"])
    rows = run.parse_ratios(output)
    assert [(r["what"], r["median"], r["low"], r["high"], r["target"], r["verdict"], r["unit"]) for r in rows] == [
        ("fleiss_kappa, one pool (cpu)", "0.0020", "0.0010", "0.0030", "0.005", "meets", " s"),
        ("a / b (cpu)", "1.50", "1.20", "1.80", "3", "meets", "x"),
        ("full panel, cold (cpu)", "0.1500", "0.1200", "0.2000", "0.1", "MISSES", " s")]
    body = run.table([_result("bench_routes.py", output)])[2:]
    assert body[0] == "| `bench_routes.py` | fleiss_kappa, one pool (cpu) | 0.0020 s | 0.0010–0.0030 | <= 0.005 s | meets |"
    assert body[2].endswith("| 0.1500 s | 0.1200–0.2000 | <= 0.1 s | **MISSES** |")
    assert body[1].endswith("| 1.50x | 1.20–1.80 | <= 3x | meets |")


def _result(name: str, output: str, status: str = "ok") -> object:
    script = run.Script(name, ("--rounds", "3"), 60.0, "what it measures")
    return run.Result(script, output, 12.0, status, run.parse_ratios(output))


def test_table_has_one_row_per_ratio_and_flags_failures() -> None:
    rows = run.table([_result("bench_routes.py", OUTPUT), _result("bench_gate.py", "", "timed out"),
                      _result("bench_icc.py", "no ratio here")])
    body = rows[2:]
    assert len(body) == 4 + 2
    assert body[0] == ("| `bench_routes.py` | from_long(DataFrame) + full panel / pd.read_csv one.csv (cpu) | 2.87x "
                       "| 2.53–3.31 | <= 3x | meets |")
    assert body[1].endswith("| — |  |")
    assert body[2].endswith("| <= 3x | **MISSES** |")
    assert body[4] == "| `bench_gate.py` | timed out | | | | **FAILED** |"
    assert body[5] == "| `bench_icc.py` | no RATIO line | | | | **FAILED** |"


def test_write_section_replaces_only_between_the_markers(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    before, after = "# Title\n\nkept above ✓\n\n", "\n\n## Kept below\ntext | with pipes\n"
    doc.write_text(f"{before}{run.BEGIN}\nold table\n{run.END}{after}", encoding="utf-8")
    run.write_section(doc, "new table\n| a | b |\n")
    assert doc.read_text(encoding="utf-8") == f"{before}{run.BEGIN}\nnew table\n| a | b |\n{run.END}{after}"
    run.write_section(doc, "again")  # idempotent on its own output
    assert doc.read_text(encoding="utf-8") == f"{before}{run.BEGIN}\nagain\n{run.END}{after}"


@pytest.mark.parametrize("content", ["no markers", f"{run.END}\n{run.BEGIN}", f"{run.BEGIN}\n{run.BEGIN}\n{run.END}"])
def test_write_section_refuses_a_doc_without_one_ordered_pair_of_markers(tmp_path: Path, content: str) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match="once each"):
        run.write_section(doc, "table")
    assert doc.read_text(encoding="utf-8") == content


def test_section_counts_targets_and_holds_each_output() -> None:
    from datetime import UTC, datetime

    text = run.section([_result("bench_routes.py", OUTPUT)], datetime(2026, 1, 2, 3, 4, tzinfo=UTC),
                       (1.0, 2.0, 3.0), (4.0, 5.0, 6.0), 600.0)
    assert "3 figures have a target: 2 met, 1 missed" in text
    assert "load average at the start 1.00 / 2.00 / 3.00" in text and "10.0 min" in text
    assert "RATIO served / cli (process): 15.70x" in text  # the script's whole output, verbatim


def test_the_repository_doc_has_the_markers_once() -> None:
    text = (BENCHMARKS.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert text.count(run.BEGIN) == 1 and text.count(run.END) == 1 and text.index(run.BEGIN) < text.index(run.END)


def test_dask_crossover_interpolates_or_says_none_was_measured() -> None:
    dask = _load("bench_dask")
    crossing = dask.crossover([(1_000_000, 2.0), (10_000_000, 0.5)])
    assert "= 1 at about 3,162,278 judgements" in crossing  # halfway in log(size): ratio 2 → 0.5
    falling = dask.crossover([(1_000_000, 4.0), (10_000_000, 2.0)])
    assert "none measured: in-memory faster at every size" in falling and "x0.50 per tenfold size" in falling
    assert "none measured: Dask faster" in dask.crossover([(1_000_000, 0.5), (10_000_000, 0.8)])
    assert "none measured (medians 1,000,000: 1.50x)" in dask.crossover([(1_000_000, 1.5)])


def test_output_lines_name_no_path_of_this_machine() -> None:
    import tempfile

    line = f"ready ({tempfile.gettempdir()}/labelgate-bench-dask/x) in {BENCHMARKS.parent}/docs and {Path.home()}/.cache"
    cleaned = run.local_paths(line)
    assert cleaned == "ready ($TMPDIR/labelgate-bench-dask/x) in ./docs and ~/.cache"
