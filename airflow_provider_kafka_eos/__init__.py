"""Exactly-once PySpark -> Kafka writes with Airflow as the two-phase-commit transaction manager.

The package's identity (version, home, connection type), and nothing else: it imports nothing, so
every layer may read it (the runbook, the Spark side, the hooks) and no import runs back up to it.
Airflow's provider metadata is ``get_provider_info.py`` (as in Airflow's own providers), the
``apache_airflow_provider`` entry point. Spark executors import the ``kafka`` sub-package through
this one: it must stay cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"

CONNECTION_TYPE = "kafka_eos"
# The project's home: documentation links, runbook URLs and the package metadata all start here
# (pyproject.toml repeats it for the package index; tests/project/test_provider_registration.py checks).
PROJECT_URL = "https://github.com/airflow-provider-kafka-eos/airflow-provider-kafka-eos"
