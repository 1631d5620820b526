# LabelGate developer entry points. A fresh machine needs only python3 (3.11 or newer):
# every target creates the virtualenv and installs what it needs on first use.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.labelgate-installed
# One BLAS thread: the core's products are thin, and threads only spin on 2 shared cores (docs/benchmarks.md).
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: demo test test-lowest test-core package test-explore test-slow lint bench bench-real setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e ".[dev,all]"
	$(PY) -m pip install -q --no-deps "irrCAC==0.4.4"
	touch $(STAMP)

## The main job (README): gate a good and a bad synthetic batch on embedded defaults (the first in-process,
## the second as a flow on Prefect's local API on SQLite; a SQLite results store, HTML reports in labelgate-demo/).
demo: $(STAMP)
	$(VENV)/bin/labelgate demo --out labelgate-demo

## The test command (README, .ci/run): unit, property, differential and doc tests.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile

## The low end of every range: each lower bound of the package metadata installed exactly (their own dependencies
## at the newest allowed), the test tools from the lock, in .venv-lowest; then the suite without the tests that
## start real servers and the distribution test, which the test command runs on the lock (docs/install.md).
LOWEST_EXTRAS ?= gate,prefect,report,postgres,label-studio,dask
LOWEST_TESTS  ?= tests src/labelgate --ignore=tests/services --ignore=tests/package/test_distribution.py
test-lowest: $(STAMP)
	$(PY) scripts/lowest_requirements.py $(LOWEST_EXTRAS) > .venv-lowest.in
	$(VENV)/bin/uv pip compile -q --python-version 3.11 --resolution lowest-direct .venv-lowest.in -o .venv-lowest.txt
	test -x .venv-lowest/bin/python || $(VENV)/bin/uv venv -q --python $(PYTHON) .venv-lowest
	$(VENV)/bin/uv pip sync -q --python .venv-lowest/bin/python .venv-lowest.txt
	$(VENV)/bin/uv pip install -q --python .venv-lowest/bin/python --no-deps -e . "irrCAC==0.4.4"
	.venv-lowest/bin/python scripts/lowest_requirements.py --show $(LOWEST_EXTRAS)
	.venv-lowest/bin/python -m pytest -q -n 2 --dist loadfile $(LOWEST_TESTS)

## The core alone: `pip install labelgate` (no extras) and the tests of the core and the metrics, in .venv-core.
test-core: $(STAMP)
	test -x .venv-core/bin/python || $(VENV)/bin/uv venv -q --python $(PYTHON) .venv-core
	$(VENV)/bin/uv pip install -q --python .venv-core/bin/python -c constraints.txt -e ".[test]"
	$(VENV)/bin/uv pip install -q --python .venv-core/bin/python --no-deps "irrCAC==0.4.4"
	.venv-core/bin/python -m pytest -q -n 2 --dist loadfile tests/core tests/metrics

## The distribution: sdist and wheel in dist/, their metadata checked by twine.
package: $(STAMP)
	rm -rf dist
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m build   # with it set, setuptools warns that it skips byte-compiling
	$(VENV)/bin/twine check --strict dist/*

## Random exploration of the property tests (the test command itself is derandomized, so CI is deterministic).
test-explore: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(PY) -m pytest -q -p no:cacheprovider tests/metrics/test_properties.py tests/metrics/test_common.py \
		tests/monitor/test_incremental.py tests/pipeline/test_validation.py tests/metrics/test_variance.py

## Interval-coverage simulations (slow; not part of CI).
test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow tests

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

## The benchmark set (docs/benchmarks.md, "make bench"): under 15 min; writes its table into docs/benchmarks.md.
bench: $(STAMP)
	$(PY) benchmarks/run.py

bench-real: $(STAMP)
	$(PY) benchmarks/real_data_panel.py

clean:
	rm -rf $(VENV) .venv-lowest .venv-core .venv-lowest.in .venv-lowest.txt dist .pytest_cache .hypothesis labelgate-demo
