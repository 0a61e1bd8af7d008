"""Shipping the runtime zip to the executors (spark/shipping.py) leaves the driver's imports alone."""

from __future__ import annotations

import os
import sys

from airflow_provider_kafka_eos.spark import shipping


def test_the_zip_goes_to_the_executors_not_on_the_drivers_sys_path(spark):
    """PySpark's ``addPyFile`` also puts the zip's copy on this process's ``sys.path``, ahead of the
    installed provider; a process spawned from this one then imported the provider from the zip and
    its submit task named a ``job.py`` inside the archive (CI, 2026-11-29). The driver keeps its own."""
    shipping.ship_to_executors(spark)  # once per context: a no-op when a test before shipped it
    name = shipping.runtime_zip().name
    assert spark.sparkContext._kafka_eos_shipped == str(shipping.runtime_zip())
    assert [entry for entry in sys.path if os.path.basename(entry) == name] == []
    assert name in spark.sparkContext._python_includes  # the executors' Python workers still get it
