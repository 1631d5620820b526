"""GX fails closed: a checkpoint saved with LabelGate's expectations, run by a process that never imported
``labelgate.gx``, must not pass without them.

Each step runs in a fresh interpreter: the test session itself has registered every expectation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SAVE = """
import sys
import great_expectations as gx
import labelgate.gx as lgx
from labelgate.gx.project import project_context
from labelgate.pipeline.synth import scenario_named, simulate

root, plain = sys.argv[1], sys.argv[2] == "plain"
context = gx.get_context(mode="file", project_root_dir=root) if plain else project_context(root)
asset = context.data_sources.add_or_update_pandas("labelgate").add_dataframe_asset("judgements")
batch = asset.add_batch_definition_whole_dataframe("whole")
suite = context.suites.add_or_update(lgx.suite_from_config({
    "name": "s", "defaults": {"crowd_pool": "crowd", "trusted_pool": "trusted", "ci": None},
    "expectations": [{"type": "normalized_cross_kappa", "min_value": 0.8}]}))
vd = context.validation_definitions.add_or_update(gx.ValidationDefinition(name="vd", data=batch, suite=suite))
context.checkpoints.add_or_update(gx.Checkpoint(name="cp", validation_definitions=[vd]))
simulate(scenario_named("random", n_items=200), seed=1).to_csv(root + "/random.csv", index=False)
"""

RUN = """
import json, sys
import great_expectations as gx
import pandas as pd

root = sys.argv[1]
context = gx.get_context(mode="file", project_root_dir=root)
result = context.checkpoints.get("cp").run(batch_parameters={"dataframe": pd.read_csv(root + "/random.csv")})
types = [r.expectation_config.type for run in result.run_results.values() for r in run.results]
print(json.dumps({"success": result.success, "types": types,
                  "registered_by_opening": "labelgate.gx" in sys.modules}))
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)


def _saved(tmp_path: Path, kind: str) -> Path:
    root = tmp_path / kind
    root.mkdir()
    out = _python(SAVE, str(root), kind)
    assert out.returncode == 0, out.stderr[-3000:]
    return root


def test_a_labelgate_project_run_without_the_import_still_runs_labelgate_expectations(tmp_path):
    # random crowd labels: normalized kappa_x cannot reach 0.8, so the checkpoint must fail
    out = _python(RUN, str(_saved(tmp_path, "labelgate")))
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["registered_by_opening"]
    assert result["types"] == ["expect_normalized_cross_kappa_to_be_at_least"]
    assert result["success"] is False


def test_a_plain_gx_project_shows_the_trap_the_labelgate_project_closes(tmp_path):
    # the same suite in a project GX made by itself: the expectation is dropped and the run "passes"
    out = _python(RUN, str(_saved(tmp_path, "plain")))
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert not result["registered_by_opening"]
    assert result["types"] == []
    assert result["success"] is True


def test_without_labelgate_installed_the_project_does_not_open(tmp_path):
    root = _saved(tmp_path, "labelgate")
    blocked = "import sys\nsys.modules['labelgate'] = None\n" + RUN  # as if LabelGate were not installed
    out = _python(blocked, str(root))
    assert out.returncode != 0
    assert "labelgate" in out.stderr


def test_gate_runs_share_one_copy_of_gx_static_assets(tmp_path):
    import pandas as pd

    from labelgate.gx.project import project_context, share_static_assets

    sizes = []
    for run in ("run-a", "run-b"):
        context = project_context(tmp_path / run)
        context.build_data_docs()
        shared = share_static_assets(context, tmp_path / "gx-static")
        static = Path(context.root_directory) / "uncommitted" / "data_docs" / "local_site" / "static"
        assert shared is not None and static.is_symlink() and static.resolve() == shared.resolve()
        assert any(static.rglob("*.css"))  # the site still finds its styles through the link
        sizes.append(sum(f.stat().st_size for f in (tmp_path / run).rglob("*") if f.is_file() and not f.is_symlink()))
    assert max(sizes) < 500_000  # each run folder holds its own pages only, not the ~4 MB of GX assets
    assert pd.Series([p.name for p in tmp_path.iterdir()]).str.fullmatch(r"[A-Za-z0-9._-]+").all()
