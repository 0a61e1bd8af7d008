"""dags/eos_manual_resolution.py on an S3 store reached only through Airflow connections (issue 35).

The person at the form commits one checkpoint a manifest owes and gives up another, with no
``AWS_*`` variable in the process: the ``kafka_eos`` connection names the store, an ``aws``
connection holds its endpoint and keys (``s3_only_through_connections``, this folder's conftest.py).
The give-up is approved first, as a person would in the UI. Each ends with the manifest's status
and a read_committed count.
"""

from __future__ import annotations

import os
import pathlib

import pytest
from test_manual_resolution_dag import BLANK_FORM, answer_when_asked
from txn_helpers import connect_admin, produce_in_transaction, states

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.transactions import write_prepared_manifest
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.dag, pytest.mark.broker]

DAG_FILE = pathlib.Path(__file__).resolve().parents[3] / "dags" / "eos_manual_resolution.py"


def test_the_form_commits_one_checkpoint_and_gives_up_another_with_the_connections_store_credentials(
    kafka_broker, airflow_db, s3_only_through_connections
):
    from airflow.dag_processing.dagbag import DagBag

    base, access = s3_only_through_connections
    prefix, topic = unique_name("s3manual") + "-", unique_name("s3manual-topic")
    kept, given_up = f"{prefix}0-4", f"{prefix}0-5"
    produce_in_transaction(kafka_broker.bootstrap, kept, topic, ["k1", "k2"], commit=False)
    produce_in_transaction(kafka_broker.bootstrap, given_up, topic, ["g1", "g2"], commit=False)
    with connect_admin(kafka_broker.bootstrap) as admin:
        kept_uri = write_prepared_manifest(admin, base, "orders", topic, [kept], checkpoint_id=4,
                                           prefix=prefix, access=access)
        given_up_uri = write_prepared_manifest(admin, base, "orders", topic, [given_up], checkpoint_id=5,
                                               prefix=prefix, access=access)
        assert not any(k.startswith("AWS_") for k in os.environ)
        bag = DagBag(dag_folder=str(DAG_FILE))
        assert bag.import_errors == {}
        dag = bag.get_dag("eos_manual_resolution")

        # The protected abort reads the S3 store with the connection's keys and refuses: PREPARED.
        refused = dag.test(run_conf={**BLANK_FORM, "action": "abort", "transactional_id": given_up})
        assert str(refused.state) == "failed"
        assert states(admin, [given_up]) == {given_up: "Ongoing"}

        committed = dag.test(run_conf={**BLANK_FORM, "action": "commit-from-manifest",
                                       "manifest_uri": kept_uri})
        assert str(committed.state) == "success"
        # A give-up loses the batch: the DAG asks a person first (Airflow's approval step), who approves.
        thread, seen = answer_when_asked(dag.dag_id, "Approve", admin, given_up)
        gave_up = dag.test(run_conf={**BLANK_FORM, "action": "abort", "manifest_uri": given_up_uri,
                                     "unprotected": True})
        thread.join(5)
        assert seen["state"] == "Ongoing"  # asked before anything was sent to Kafka
        assert str(gave_up.state) == "success"
        # the give-up fences the id (InitProducerId): its open transaction is aborted, the id Empty
        assert states(admin, [kept, given_up]) == {kept: "CompleteCommit", given_up: "Empty"}
    assert read_manifest(kept_uri, access=access).status is ManifestStatus.COMMITTED
    assert read_manifest(given_up_uri, access=access).status is ManifestStatus.ABORTED
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [b"k1", b"k2"])
