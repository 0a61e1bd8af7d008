"""The public import paths: the contract of the package (docs/architecture.md, "Public and internal").

``PUBLIC`` lists every (module, name) users, the docs and the example DAGs may import; a name not
listed here is internal and moves freely between releases (as kafka-python and Flink keep theirs).
Each path is imported in a fresh interpreter, so it works as the first import of a process (a DAG
file), not only after another module loaded it. Paths the modules had before the package was given
its layers are not kept: the package was never released under them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import airflow_provider_kafka_eos

PACKAGE_DIR = Path(airflow_provider_kafka_eos.__file__).parent

# (module, name) pairs that users, docs and example DAGs import.
PUBLIC = [
    ("airflow_provider_kafka_eos.get_provider_info", "get_provider_info"),
    ("airflow_provider_kafka_eos.hooks.kafka_eos", "KafkaEosHook"),
    ("airflow_provider_kafka_eos.operators.submit", "SparkEosSubmitOperator"),
    ("airflow_provider_kafka_eos.operators.connect_submit", "SparkEosConnectOperator"),
    ("airflow_provider_kafka_eos.operators.commit", "KafkaCommitTransactionsOperator"),
    ("airflow_provider_kafka_eos.operators.abort", "KafkaAbortTransactionsOperator"),
    ("airflow_provider_kafka_eos.operators.resolve", "KafkaTransactionResolutionOperator"),
    ("airflow_provider_kafka_eos.operators.preflight", "KafkaEosPreflightOperator"),
    ("airflow_provider_kafka_eos.sensors.lingering", "KafkaLingeringTransactionSensor"),
    ("airflow_provider_kafka_eos.triggers.lingering", "LingeringTransactionTrigger"),
    ("airflow_provider_kafka_eos.cli", "main"),
    ("airflow_provider_kafka_eos.spark.writer", "write_exactly_once"),
    ("kafka_eos_testing.pytest_plugin", "kafka_broker"),
    ("kafka_eos_testing.verify", "assert_exactly_once"),
    ("kafka_eos_testing.verify", "count_keys"),
    ("airflow_provider_kafka_eos.kafka.errors", "KafkaEosError"),
    ("airflow_provider_kafka_eos.kafka.errors", "UsageError"),
    ("airflow_provider_kafka_eos.kafka.admin.transactions", "TransactionAdmin"),
    ("airflow_provider_kafka_eos.kafka.checkpoints.manifest", "read_manifest"),
    ("airflow_provider_kafka_eos.kafka.checkpoints.lifecycle", "commit_checkpoint"),
    ("airflow_provider_kafka_eos.kafka.operations.classify", "FindingKind"),
    ("airflow_provider_kafka_eos.kafka.operations.scan", "Findings"),
    ("airflow_provider_kafka_eos.kafka.operations.resolution_request", "ResolutionRequest"),
    ("airflow_provider_kafka_eos.kafka.operations.resolution", "run_resolution"),
    ("airflow_provider_kafka_eos.assets.lineage", "kafka_asset_uri"),
    ("airflow_provider_kafka_eos.assets.lineage", "kafka_namespace"),
    ("airflow_provider_kafka_eos.tasks.fail_now", "fail_now_exception"),
]


def _probe(code: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_each_public_name_imports_in_a_fresh_interpreter():
    code = (
        "import importlib, json\n"
        f"pairs = {PUBLIC!r}\n"
        "missing = [f'{m}.{n}' for m, n in pairs if not hasattr(importlib.import_module(m), n)]\n"
        "print(json.dumps(missing))\n"
    )
    assert _probe(code) == []


def test_the_paths_before_the_layers_are_gone():
    """The flat paths of the unreleased layout (``kafka.transactions``, ``operators.lineage``...)
    import nothing: no alias table, no file, so no second name for a module."""
    code = (
        "import importlib, json\n"
        f"old = {OLD_PATHS!r}\n"
        "found = []\n"
        "for path in old:\n"
        "    try:\n"
        "        importlib.import_module(path)\n"
        "    except ModuleNotFoundError:\n"
        "        continue\n"
        "    found.append(path)\n"
        "print(json.dumps(found))\n"
    )
    assert _probe(code) == []
    assert not (PACKAGE_DIR / "_moved.py").exists()


# A few of the paths the modules had before the package was given its layers.
OLD_PATHS = [
    "airflow_provider_kafka_eos.kafka.transactions",
    "airflow_provider_kafka_eos.kafka.manifest",
    "airflow_provider_kafka_eos.kafka.checkpoint",
    "airflow_provider_kafka_eos.kafka.resolution",
    "airflow_provider_kafka_eos.operators.lineage",
    "airflow_provider_kafka_eos.operators.fail_now",
]
