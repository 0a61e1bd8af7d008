"""Process-wide test environment.

Airflow reads its configuration when first imported, so AIRFLOW_HOME and friends are set
here, at conftest import time, before any test module imports Airflow. Every run gets its
own throw-away AIRFLOW_HOME with a SQLite database, and the example DAGs in ``dags/`` are
the dags folder, so DAG tests run exactly the files users copy.
"""

from __future__ import annotations

import logging
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from kafka_eos_testing.spark_cluster import QUICK_JVM

# The provider's pytest plugin (kafka_broker fixtures) is opt-in, as for any user of the
# ``[testing]`` extra: installing the provider no longer loads it into every pytest run.
# The others are fixtures of tests/support/ that tests in several folders use (tests/README.md).
pytest_plugins = ["kafka_eos_testing.pytest_plugin", "s3_fixtures", "txn_fixtures", "registry_fixtures",
                  "spark_connect_fixtures", "spark_cluster_fixtures"]

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DAGS_FOLDER = REPO_ROOT / "dags"
# Helpers shared by tests in several folders (tests/README.md): imported by module name, as
# pytest's default import mode imports each test's own folder, so their folder is on the path.
SUPPORT = pathlib.Path(__file__).resolve().parent / "support"
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))

if "AIRFLOW_HOME" not in os.environ or os.environ.get("KAFKA_EOS_TEST_KEEP_AIRFLOW_HOME") != "1":
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="kafka-eos-airflow-")
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(DAGS_FOLDER)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO")
# The example pipelines' transaction deadline is off for this process: on Airflow 3.3.2 dag.test()
# of a DAG with a deadline fails once its run succeeded ('dict' object has no attribute 'hex',
# apache/airflow#73428, fix open), and the DAG tests run dag.test(). The Airflow deployments the
# tests start set their own (tests/system/airflow_scheduler: 18 s); tests/tasks tests the default.
os.environ.setdefault("KAFKA_EOS_PIPELINE_DEADLINE_FRACTION", "off")
# Spark workers must run this interpreter (the venv's), not the first python3 on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Test jobs are small, so every JVM spark-submit starts for a test (the in-process PySpark
# session's, the example DAGs' local-mode drivers, those of the real scheduler's and Celery's
# tasks, which inherit this environment) starts as the test cluster's do: C1 only, serial GC,
# a third less CPU for a small job (12.98 vs 20.57 CPU s for a small local[2] job, farm-bench,
# 2026-11-26): CI time (docs/ci.md) and the soak's checkpoints an hour (docs/soak.md).
# Benchmarks run outside pytest and keep the JVM's defaults. A user's SPARK_SUBMIT_OPTS wins.
os.environ.setdefault("SPARK_SUBMIT_OPTS", QUICK_JVM)
# py4j logs "Closing down clientserver connection" from a finaliser at interpreter exit, after
# pytest closed its streams; that INFO line adds only a "Logging error" trace after the summary.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def airflow_db_template(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """An empty migrated SQLite metadata database (``airflow.db``), made once per run.

    Every Airflow the run starts (this process's, the real scheduler's, the UI's, the Celery
    deployment's) copies it instead of running ``airflow db migrate`` again (CI time): they all
    need the same schema and nothing in it depends on their AIRFLOW_HOME.
    """
    home = tmp_path_factory.mktemp("airflow-db-template")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
    env["AIRFLOW_HOME"] = str(home)
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True,
                   env=env, cwd=home, timeout=300)
    return home / "airflow.db"


@pytest.fixture(scope="session")
def airflow_db(request: pytest.FixtureRequest) -> pathlib.Path:
    """A migrated SQLite metadata database in this run's AIRFLOW_HOME (made once per run)."""
    home = pathlib.Path(os.environ["AIRFLOW_HOME"])
    marker = home / ".migrated"
    if not marker.exists():
        if (home / "airflow.db").exists() or "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in os.environ:
            # a kept home (KAFKA_EOS_TEST_KEEP_AIRFLOW_HOME=1) or another database: migrate it in place
            subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True,
                           capture_output=True, env=os.environ.copy())
        else:
            shutil.copyfile(request.getfixturevalue("airflow_db_template"), home / "airflow.db")
        marker.touch()
    return home
