"""Every import path users rely on keeps working: the provider's classes, the CLI, the pytest
plugin, and the old module paths that the docs and the example DAGs name (served by
``airflow_provider_kafka_eos/_moved.py`` since the modules moved into sub-packages).

Each path is imported in a fresh interpreter, so an old path must work as the first import of
a process (a DAG file), not only after the new module was loaded by something else.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_kafka_eos import _moved

PACKAGE_DIR = Path(_moved.__file__).parent

# (module, name) pairs that users, docs and example DAGs import.
PUBLIC = [
    ("airflow_provider_kafka_eos", "get_provider_info"),
    ("airflow_provider_kafka_eos.hooks.kafka_eos", "KafkaEosHook"),
    ("airflow_provider_kafka_eos.operators.submit", "SparkEosSubmitOperator"),
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
    # old paths the docs and the example DAGs name
    ("airflow_provider_kafka_eos.kafka.transactions", "TransactionAdmin"),
    ("airflow_provider_kafka_eos.kafka.manifest", "read_manifest"),
    ("airflow_provider_kafka_eos.kafka.checkpoint", "commit_checkpoint"),
    ("airflow_provider_kafka_eos.kafka.classify", "FindingKind"),
    ("airflow_provider_kafka_eos.kafka.classify", "Findings"),
    ("airflow_provider_kafka_eos.kafka.resolution", "ResolutionRequest"),
    ("airflow_provider_kafka_eos.operators.lineage", "kafka_asset_uri"),
    ("airflow_provider_kafka_eos.operators.lineage", "kafka_namespace"),
    ("airflow_provider_kafka_eos.operators.fail_now", "fail_now_exception"),
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


def test_old_paths_work_as_the_first_imports_of_a_process():
    """A DAG file's first import may be an old path: each gives its new module, by its new name."""
    code = (
        "import importlib, json, sys\n"
        f"moved = {_moved.MOVED!r}\n"
        "got = {o: [importlib.import_module(o) is sys.modules[n], importlib.import_module(o).__name__]"
        " for o, n in moved.items()}\n"
        "print(json.dumps(got))\n"
    )
    assert _probe(code) == {old: [True, new] for old, new in _moved.MOVED.items()}


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_an_old_path_is_the_moved_module_itself(old):
    """``import old`` gives the very module object of its new path (so mock.patch on an old path
    patches the code that runs), and no file is left at the old path to shadow the alias."""
    assert importlib.import_module(old) is importlib.import_module(_moved.MOVED[old])
    relative = old.split(".", 1)[1].replace(".", "/")
    assert not (PACKAGE_DIR / f"{relative}.py").exists(), f"{old}: a file at the old path shadows the alias"
