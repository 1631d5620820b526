"""Fixtures of the Great Expectations tests: one local Spark session for the GX Spark data sources."""

from __future__ import annotations

import os
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark_session() -> Any:
    """One local Spark session for the whole test session (one JVM: starting one takes seconds).

    ``local[1]``, a small driver, no UI, one shuffle partition. Skips when pyspark (``pip install -e ".[spark]"``,
    part of ``make setup``) or a Java runtime (Spark 4 needs Java 17) is missing, or when the session does not start.
    """
    import shutil

    pytest.importorskip("pyspark", reason="pyspark is not installed (the 'spark' extra; `make setup` installs it)")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("no Java runtime for Spark: install Java 17 (e.g. openjdk-17-jre-headless) or set JAVA_HOME")
    from pyspark.sql import SparkSession

    try:
        spark = (SparkSession.builder.master("local[1]").appName("labelgate-tests")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "512m").config("spark.sql.shuffle.partitions", "1")
                 .getOrCreate())
    except Exception as exc:  # a JVM that does not start (wrong Java version, no memory)
        first = (str(exc).splitlines() or [""])[0][:300]
        pytest.skip(f"a local Spark session did not start: {type(exc).__name__}: {first}")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()
