"""Shared fixtures. Environment for Prefect/GX is set here, before anything imports them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Hypothesis is deterministic by default (the README test command and CI): the same examples every run, so a green
# run stays green. `HYPOTHESIS_PROFILE=explore` (`make test-explore`) searches new random examples instead; a
# failure found there becomes an explicit @example.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, max_examples=500, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

SHARED_DATA = Path(os.environ.get("LABELGATE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared real datasets folder; tests using it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared datasets not found at {SHARED_DATA} (set LABELGATE_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def prefect_api():
    """One temporary Prefect API (SQLite) for the whole test session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield
