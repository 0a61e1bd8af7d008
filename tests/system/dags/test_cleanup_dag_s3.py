"""dags/eos_cleanup.py on an S3 store reached only through Airflow connections (issue 35).

The soak in production's shape found the cleanup's ``commit_pending`` failing with botocore's
``NoCredentialsError``: the store's credentials lived in a process-wide table that only some paths
filled. Here no ``AWS_*`` variable exists in the process: the ``kafka_eos`` connection names the
store and an ``aws`` connection holds its endpoint and keys, and every task of the DAG must reach
the store with them (the hook's ``StoreAccess``, handed to each store call). The fixture
(``s3_only_through_connections``) is in this folder's conftest.py.
"""

from __future__ import annotations

import os
import pathlib

import pytest
from txn_helpers import connect_admin, produce_in_transaction, states

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.transactions import write_prepared_manifest
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.dag, pytest.mark.broker]

DAG_FILE = pathlib.Path(__file__).resolve().parents[3] / "dags" / "eos_cleanup.py"


def test_the_cleanup_commits_a_commit_pending_checkpoint_with_the_connections_store_credentials(
    kafka_broker, airflow_db, s3_only_through_connections
):
    from airflow.dag_processing.dagbag import DagBag

    base, access = s3_only_through_connections
    prefix, topic = unique_name("s3clean") + "-", unique_name("s3clean-topic")
    pending = f"{prefix}0-4"
    produce_in_transaction(kafka_broker.bootstrap, pending, topic, ["s1", "s2", "s3"], commit=False)
    with connect_admin(kafka_broker.bootstrap) as admin:
        uri = write_prepared_manifest(admin, base, "orders", topic, [pending], checkpoint_id=4, prefix=prefix,
                                      access=access)
        assert count_keys(kafka_broker.bootstrap, topic) == {}  # prepared: not visible yet
        assert not any(k.startswith("AWS_") for k in os.environ)

        bag = DagBag(dag_folder=str(DAG_FILE))
        assert bag.import_errors == {}
        run = bag.get_dag("eos_cleanup").test(run_conf={
            "prefixes": [prefix], "min_age_seconds": 0, "commit_pending_action": "commit"})

        assert str(run.state) == "success", {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
        assert states(admin, [pending]) == {pending: "CompleteCommit"}
    manifest = read_manifest(uri, access=access)
    assert manifest.status is ManifestStatus.COMMITTED
    assert manifest.commit_report["committed_by"] == "eos_cleanup"
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [b"s1", b"s2", b"s3"])
