"""`import labelgate` loads the core only (the metrics on first use): no SciPy, pandas, GX, Prefect, pandera, SQLAlchemy, pyarrow.

A fresh interpreter is the only honest place to look: the test session itself has imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ["scipy", "pandas", "great_expectations", "prefect", "pandera", "sqlalchemy", "pyarrow", "matplotlib",
         "jinja2", "typer", "dask"]

PROBE = """
import json, sys
import labelgate as lg
loaded = sorted({m.split('.')[0] for m in sys.modules} & set(HEAVY))
r = lg.Ratings.from_wide([[1, 1, 2], [0, 1, 1], [0, 0, 0], [2, 2, 1]])
alpha = float(lg.krippendorff_alpha(r))
icc = lg.icc(lg.Ratings.from_wide([[1.0, 2.0], [2.0, 2.5], [4.0, 3.5], [5.0, 6.0]], level="interval"), ci=0.9)
print(json.dumps({"loaded": loaded, "alpha": alpha, "icc_ci": list(icc.ci), "after": "scipy" in sys.modules}))
"""


def _probe(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{code}"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_labelgate_loads_no_heavy_package_and_metrics_still_work():
    result = _probe(PROBE)
    assert result["loaded"] == []
    assert 0 < result["alpha"] < 1
    low, high = result["icc_ci"]
    assert low < high  # the F interval needs scipy.stats: imported on first use
    assert result["after"]


def test_the_probe_sees_a_heavy_import():
    result = _probe("import json, sys\nimport labelgate, scipy.sparse\n"
                    "print(json.dumps({'loaded': sorted({m.split('.')[0] for m in sys.modules} & set(HEAVY))}))")
    assert result["loaded"] == ["scipy"]


LAZY_METRICS = """
import json, sys
import labelgate as lg
before = "labelgate.metrics" in sys.modules
fleiss = lg.fleiss_kappa
import labelgate.metrics as metrics
namespace = {}
exec("from labelgate import *", namespace)
print(json.dumps({"before": before, "same": fleiss is metrics.fleiss_kappa,
                  "all": lg.__all__, "star": sorted(k for k in namespace if not k.startswith("_")),
                  "metrics_all": metrics.__all__, "in_dir": "spa" in dir(lg), "subpackage": lg.metrics is metrics}))
"""


def test_the_metrics_load_on_first_use_and_stay_public():
    result = _probe(LAZY_METRICS)
    assert result["before"] is False  # `import labelgate` alone does not import them
    assert result["same"] and result["in_dir"] and result["subpackage"]
    core = ["DesignError", "Estimate", "InputError", "LabelGateError", "ParameterError", "Ratings", "Reason",
            "ratings_by_pool"]
    assert result["all"] == [*core, *result["metrics_all"]]
    assert result["star"] == sorted(result["all"])
