"""Cluster deploy mode (issue #37): what a driver on the cluster cannot do is refused by name in the
submit task, before the input's claim is taken or spark-submit runs (no store object, no process).

The Spark connections are real Airflow connections (environment variables) resolved by the Spark
provider's own hook; nothing is submitted, so no cluster is needed. A Python driver on a standalone
master in cluster mode (Spark's own refusal, and the task's by name, with nothing prepared on the
broker) is the ``standalone-cluster`` target of the conformance suite (tests/system/conformance).
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.spark import handoff
from airflow_provider_kafka_eos.tasks.fail_now import fail_now_exception

pytestmark = pytest.mark.dag


def _refused(operator, match: str) -> str:
    """The task fails at once (no retry helps), the ConfigError naming the cause as its cause."""
    with pytest.raises(fail_now_exception(), match=match) as failed:
        operator.execute({})
    assert isinstance(failed.value.__cause__, ConfigError)
    return str(failed.value)


@pytest.fixture
def connections(monkeypatch, tmp_path):
    monkeypatch.setenv("KAFKA_EOS_PRIVATE_DIR", str(tmp_path / "private"))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EOS_CM", json.dumps(
        {"conn_type": "kafka_eos", "extra": {"bootstrap.servers": "127.0.0.1:9"}}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE_CM", json.dumps(
        {"conn_type": "spark", "host": "spark://127.0.0.1", "port": 7077,
         "extra": {"deploy-mode": "cluster"}}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN_CM", json.dumps(
        {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}))
    return tmp_path


def _submit(store: str, conn_id: str, **kwargs):
    return SparkEosSubmitOperator(
        task_id="submit", pipeline_id="orders", topic="orders-out", manifest_base_uri=store,
        application_callable="my_jobs:build", kafka_eos_conn_id="kafka_eos_cm", conn_id=conn_id,
        input_id="batch-1", **kwargs)


@pytest.mark.parametrize("conn_id", ["spark_standalone_cm", "spark_yarn_cm"])
@pytest.mark.parametrize("store", ["file", "path"])
def test_a_local_store_in_cluster_mode_is_refused_before_the_claim(connections, conn_id, store):
    base = connections / "manifests"
    uri = base.as_uri() if store == "file" else str(base)
    message = _refused(_submit(uri, conn_id), "deploy_mode 'cluster': manifest store .* is on this Airflow "
                                              "worker's disk")
    assert "s3://" in message and "Nothing was claimed or submitted" in message
    assert not base.exists()  # no claim, no manifest folder: the store was never written
    assert not (connections / "private").exists()  # no private file either


def test_the_deploy_mode_argument_overrides_a_client_connection(connections, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLIENT_CM", json.dumps(
        {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "client"}}))
    _refused(_submit(str(connections / "m"), "spark_client_cm", deploy_mode="cluster"),
             "is on this Airflow worker's disk")


def test_an_s3_store_in_cluster_mode_needs_the_mounted_config_never_argv(connections):
    _refused(_submit("s3://bucket/manifests", "spark_yarn_cm"),
             f"name the path in env_vars=.*{handoff.CONFIG_FILE_ENV}")


def test_yarn_cluster_mode_without_the_rm_api_is_refused_before_the_claim_not_by_the_provider_after_it(
    connections
):
    """Airflow >= 3.3: the Spark provider's durable re-attach (its default) raises inside its execute,
    which runs after the input's claim; the task says it first, with both ways out."""
    mounted = {"env_vars": {handoff.CONFIG_FILE_ENV: "kafka-client.json"}}
    message = _refused(_submit("s3://bucket/manifests", "spark_yarn_cm", **mounted),
                       "YARN with durable=True")
    assert "yarn_track_via_rm_api=True" in message and "durable=False" in message
    assert "Nothing was claimed or submitted" in message
    for ways_out in ({"yarn_track_via_rm_api": True}, {"durable": False}):
        operator = _submit("s3://bucket/manifests", "spark_yarn_cm", **mounted, **ways_out)
        # past the check: the next step wants the run's checkpoint id, which an empty context lacks
        with pytest.raises(fail_now_exception(), match="cannot derive a checkpoint id"):
            operator.execute({})


def test_with_an_s3_store_and_a_mounted_file_no_secret_reaches_argv_conf_or_a_worker_file(
    connections, monkeypatch
):
    """The worker's store credentials (an AWS connection) stay on the worker: the driver reads its own
    from the mounted file's store_options (tests/hooks/test_store_credentials.py) or its standard chain."""
    secret = "store-secret-0815"
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EOS_CM", json.dumps(
        {"conn_type": "kafka_eos", "extra": {"bootstrap.servers": "127.0.0.1:9",
                                             "sasl.password": "kafka-pw-17",
                                             "manifest_store_conn_id": "store_aws_cm"}}))
    monkeypatch.setenv("AIRFLOW_CONN_STORE_AWS_CM", json.dumps(
        {"conn_type": "aws", "login": "AKIDCM", "password": secret}))
    operator = _submit("s3://bucket/manifests", "spark_yarn_cm",
                       env_vars={handoff.CONFIG_FILE_ENV: "kafka-client.json"},
                       files="/secrets/c.json#kafka-client.json")
    operator._prepare_launch(7, None)
    launched = json.dumps([operator.application_args, operator.conf, operator.env_vars, operator.py_files])
    assert secret not in launched and "kafka-pw-17" not in launched and "AKIDCM" not in launched
    assert operator.env_vars[handoff.CONFIG_FILE_ENV] == "kafka-client.json" and operator._config_file is None
    assert not (connections / "private").exists()  # no private file: the driver could not read it
