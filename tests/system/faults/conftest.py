"""One SparkSession for the whole test process (starting one costs seconds)."""

from __future__ import annotations

import pytest

from kafka_eos_testing.spark import local_spark_session


@pytest.fixture(scope="session")
def spark():
    return local_spark_session()
