# LabelGate developer entry points. A fresh machine needs only python3 (3.11):
# every target creates the virtualenv and installs what it needs on first use.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.labelgate-installed
# One BLAS thread: the core's products are thin, and threads only spin on 2 shared cores (docs/benchmarks.md).
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: demo test test-explore test-slow lint bench bench-real setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e ".[dev,postgres,dask,report,spark]"
	$(PY) -m pip install -q --no-deps "irrCAC==0.4.4"
	touch $(STAMP)

## The main job (README): gate a good and a bad synthetic batch on embedded defaults
## (Prefect's local API on SQLite, a SQLite results store, HTML reports in labelgate-demo/).
demo: $(STAMP)
	$(VENV)/bin/labelgate demo --out labelgate-demo

## The test command (README, .ci/run): unit, property, differential and doc tests.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile

## Random exploration of the property tests (the test command itself is derandomized, so CI is deterministic).
test-explore: $(STAMP)
	HYPOTHESIS_PROFILE=explore $(PY) -m pytest -q -p no:cacheprovider tests/test_properties.py tests/test_common.py \
		tests/test_monitor.py tests/test_validation.py tests/test_variance.py

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
	rm -rf $(VENV) .pytest_cache .hypothesis labelgate-demo
