"""SASL_SSL with SCRAM-SHA-512 on a real Kafka 4.4 node: a pipeline principal with ACLs only."""

from __future__ import annotations

import pytest
from secured_support import (
    PRODUCER_PATHS,
    acl_entries,
    lingering_scan_and_trigger,
    preflight_as,
    refusal_on_both_paths,
    two_partition_pipeline,
    write_acl_file,
)

from airflow_provider_kafka_eos.kafka.errors import AuthenticationError, SecurityProtocolMismatchError
from kafka_eos_testing.apache_kafka.cluster import ApacheKafkaCluster

pytestmark = pytest.mark.secured


@pytest.fixture(scope="module")
def scram_node(tmp_path_factory):
    directory = tmp_path_factory.mktemp("scram")
    acl_file = write_acl_file(
        directory,
        {
            "users": {"admin": "admin-secret", "etl": "etl-secret"},
            "super_users": ["User:admin"],
            "acls": acl_entries("User:etl"),
        },
    )
    cluster = ApacheKafkaCluster(
        {
            "tls": True,
            "sasl": True,
            "sasl_mechanism": "SCRAM-SHA-512",
            "acl_file": acl_file,
            "data_dir": str(directory / "kafka"),
        }
    )
    yield cluster
    cluster.stop()


@pytest.mark.parametrize("path", PRODUCER_PATHS)
def test_two_partition_pipeline_as_a_scram_user_over_tls(scram_node, path):
    config = scram_node.sasl_config("etl", "etl-secret")
    assert config["security.protocol"] == "SASL_SSL" and config["sasl.mechanism"] == "SCRAM-SHA-512"
    two_partition_pipeline(config, scram_node.admin_config(), path)


def test_lingering_scan_and_trigger_as_a_scram_user(scram_node, monkeypatch, tmp_path):
    config = scram_node.sasl_config("etl", "etl-secret")
    lingering_scan_and_trigger(monkeypatch, tmp_path, config, scram_node.admin_config())


def test_preflight_names_the_scram_user_as_principal(scram_node, monkeypatch):
    config = scram_node.sasl_config("etl", "etl-secret")
    preflight_as(monkeypatch, config, "User:etl")
    preflight_as(monkeypatch, config, "User:etl", own=False)


def _base(scram_node, **settings):
    return {"bootstrap.servers": scram_node.bootstrap, **settings}


def test_wrong_password_is_named_within_a_second(scram_node):
    config = scram_node.sasl_config("etl", "not-the-secret")
    for _path, message, _took in refusal_on_both_paths(config, AuthenticationError):
        assert f"{scram_node.bootstrap} refused the credentials of SASL user 'etl'" in message
        assert "not-the-secret" not in message
        assert "kafka-eos-txn runbook sasl-authentication" in message


def test_mechanism_not_enabled_on_the_listener_is_named(scram_node):
    config = scram_node.sasl_config("etl", "etl-secret", **{"sasl.mechanism": "PLAIN"})
    for _path, message, _took in refusal_on_both_paths(config, AuthenticationError):
        assert f"SASL mechanism PLAIN is not enabled on the listener at {scram_node.bootstrap}" in message


def test_plaintext_client_at_the_tls_port_is_named(scram_node):
    config = _base(scram_node, **{"security.protocol": "PLAINTEXT"})
    for _path, message, _took in refusal_on_both_paths(config, SecurityProtocolMismatchError):
        assert f"{scram_node.bootstrap} is a TLS listener but security.protocol is PLAINTEXT" in message


def test_tls_client_at_a_plaintext_port_is_named(scram_node):
    internal = scram_node.nodes[0].probe_address  # the node's SASL_PLAINTEXT listener
    config = {
        "bootstrap.servers": internal,
        "security.protocol": "SSL",
        "ssl.ca.location": str(scram_node.tls_dir / "ca.pem"),
    }
    for _path, message, _took in refusal_on_both_paths(config, SecurityProtocolMismatchError):
        assert f"{internal} is a plaintext listener" in message


def _store_style_properties(path, node, password):
    """A client.properties as Java's Properties.store writes it (``\\=`` inside the JAAS value)."""
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username\\="etl" password\\="{password}";'
    )
    path.write_text(
        "#written by java.util.Properties.store\n"
        f"bootstrap.servers={node.bootstrap.replace(':', chr(92) + ':')}\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={jaas}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={node.tls_dir / 'ca.pem'}\n"
    )
    path.chmod(0o600)
    return path


def _cli(*args):
    import subprocess
    import sys
    from pathlib import Path

    tool = str(Path(sys.executable).with_name("kafka-eos-txn"))
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)


def test_cli_with_a_store_style_client_properties_lists_over_sasl_ssl(scram_node, tmp_path):
    config = _store_style_properties(tmp_path / "client.properties", scram_node, "etl-secret")
    result = _cli(
        "list", "--command-config", str(config), "--prefix", "secured-", "--timeout", "20s"
    )
    assert result.returncode == 0, result.stderr


def test_cli_with_a_wrong_password_names_the_refusal(scram_node, tmp_path):
    config = _store_style_properties(tmp_path / "client.properties", scram_node, "not-the-secret")
    result = _cli(
        "list", "--command-config", str(config), "--prefix", "secured-", "--timeout", "20s"
    )
    assert result.returncode != 0
    assert (
        f"{scram_node.bootstrap} refused the credentials of SASL user 'etl' (SCRAM-SHA-512)" in result.stderr
    )
    assert "not-the-secret" not in result.stderr + result.stdout


def test_cli_with_secrets_only_in_the_environment_lists_and_commits(scram_node, tmp_path, monkeypatch):
    """No secret in the file or argv: the SCRAM user and password come from KAFKA_EOS_SASL_*."""
    import json

    from confluent_kafka.admin import AdminClient, NewTopic
    from secured_support import unique

    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from kafka_eos_testing.transactions import (
        produce_transaction,
        wait_until_committed,
        write_prepared_manifest,
    )
    from kafka_eos_testing.verify import assert_exactly_once, count_keys

    password = "etl-secret"
    config = scram_node.sasl_config("etl", password)
    topic, tid = unique("cli-env"), unique("cli-env") + "-0-1"
    creator = AdminClient(scram_node.admin_config())
    creator.create_topics([NewTopic(topic, 1, 1)], operation_timeout=10)[topic].result(timeout=15)
    keys = [f"{tid}/{i}".encode() for i in range(5)]
    produce_transaction(config, tid, topic, keys, transaction_timeout_ms=600_000)
    with TransactionAdmin(KafkaClientConfig.from_mapping(config)) as admin:
        uri = write_prepared_manifest(admin, tmp_path.as_uri(), "secured-cli", topic, [tid])
    settings = tmp_path / "client.properties"  # the TLS and SASL settings, no credentials
    settings.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={scram_node.tls_dir / 'ca.pem'}\n"
    )
    monkeypatch.setenv("KAFKA_EOS_SASL_USERNAME", "etl")
    monkeypatch.setenv("KAFKA_EOS_SASL_PASSWORD", password)
    common = ("--bootstrap-servers", scram_node.bootstrap, "--command-config", str(settings))

    listed = _cli("list", *common, "--prefix", tid, "--json", "--timeout", "20s")
    assert listed.returncode == 0, listed.stderr
    assert tid in listed.stdout and "Ongoing" in listed.stdout
    committed = _cli("commit", *common, "--manifest", uri, "--timeout", "30s")
    assert committed.returncode == 0, committed.stderr
    with TransactionAdmin(KafkaClientConfig.from_mapping(config)) as admin:
        wait_until_committed(admin, [tid])
    assert_exactly_once(count_keys(config, topic), keys)
    for result in (listed, committed):
        assert password not in result.stdout + result.stderr
    assert password not in json.dumps(list(common))

    monkeypatch.setenv("KAFKA_EOS_SASL_PASSWORD", "not-the-secret")
    refused = _cli("list", *common, "--prefix", tid, "--timeout", "20s")
    assert refused.returncode != 0
    assert f"{scram_node.bootstrap} refused the credentials of SASL user 'etl'" in refused.stderr
    assert "not-the-secret" not in refused.stdout + refused.stderr


MASKED = {
    "sasl.password": "etl-secret",
    "ssl.key.password": "key-pass-4f1e9a",
    "sasl.oauthbearer.client.secret": "oidc-secret-8c2d7b",
}


MASKING_DAG = """
import datetime as dt
import logging

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

from airflow_provider_kafka_eos.operators.preflight import KafkaEosPreflightOperator

CONN = "kafka_eos_masking"
KEYS = {keys!r}


def log_the_secrets(**secrets):
    # A careless task: prints and logs the connection's secrets it was templated with.
    for name, value in secrets.items():
        print(f"printed {{name}}={{value}}")
        logging.getLogger("airflow.task").info("logged %s=%s", name, value)


with DAG("secured_masking", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    preflight = KafkaEosPreflightOperator(
        task_id="preflight",
        kafka_eos_conn_id=CONN,
        transactional_id_prefix="secured-pipe-",
        topics=["secured-out"],
        transaction_timeout_ms=600_000,
        job_duration_budget=30,
        commit_execution_timeout=60,
    )
    show = PythonOperator(
        task_id="show",
        python_callable=log_the_secrets,
        op_kwargs={{
            k.replace(".", "_"): "{{{{ conn." + CONN + ".extra_dejson['" + k + "'] }}}}" for k in KEYS
        }},
    )
    preflight >> show
"""


def test_connection_secrets_never_reach_a_task_log_a_rendered_template_or_xcom(
    scram_node, airflow_db, monkeypatch, capfd, caplog, tmp_path
):
    """dag.test() on SQLite: a preflight task (XCom: its report) and a task templated with the
    extra's secrets. Airflow 3.3 masks an extra's values by key name when ``extra_dejson`` is read
    (names containing password / secret / token...: all three here); the hook also registers every
    key the provider counts as secret (``is_secret_key``). So the log, the stored rendered fields and
    every XCom show ``***`` instead."""
    import json

    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from secured_support import set_connection

    extra = {**scram_node.sasl_config("etl", MASKED["sasl.password"]), **MASKED}
    set_connection(monkeypatch, "kafka_eos_masking", extra)
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "secured_masking.py").write_text(MASKING_DAG.format(keys=sorted(MASKED)))
    local = "airflow.dag_processing.bundles.local.LocalDagBundle"
    bundles = [  # the repository's dags folder, plus this test's own DAG folder
        {"name": "dags-folder", "classpath": local, "kwargs": {}},
        {"name": "secured-masking", "classpath": local, "kwargs": {"path": str(folder)}},
    ]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    dag = bag.get_dag("secured_masking")
    run = dag.test()
    output = "".join(capfd.readouterr()) + caplog.text  # where the task's lines went depends on the run
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states == {"preflight": "success", "show": "success"}, output[-3000:]
    # dag.test() runs tasks in-process, without the supervisor whose log writer passes every line
    # through the secrets masker; the task log is what that masker makes of the task's output.
    from airflow.sdk._shared.secrets_masker import redact

    assert "printed sasl_password=" in output and "logged ssl_key_password=" in output, output[-3000:]
    task_log = redact(output)
    assert "printed sasl_password=***" in task_log and "logged ssl_key_password=***" in task_log

    with create_session() as session:
        xcoms = session.query(XComModel).filter_by(dag_id=dag.dag_id, run_id=run.run_id).all()
        stored_xcom = json.dumps([x.value for x in xcoms], default=str)
        show_ti = next(ti for ti in run.get_task_instances() if ti.task_id == "show")
        rendered = RenderedTaskInstanceFields.get_templated_fields(show_ti, session=session)
    assert xcoms and "User:etl" in stored_xcom  # the preflight report is there, naming the principal
    assert rendered and "***" in json.dumps(rendered, default=str)
    for name, value in MASKED.items():
        places = (("task log", task_log), ("XCom", stored_xcom), ("rendered", json.dumps(rendered)))
        for where, text in places:
            assert value not in text, f"{name} appears in the {where}"


def test_spark_cluster_job_writes_as_a_scram_user(
    scram_node, spark_cluster, monkeypatch, capfd, caplog, tmp_path
):
    """Executors without the provider, on the standalone cluster, write over SASL_SSL as ``etl``: the
    connection's config, password included, reaches the job only through the operator's 0600 private
    file and the task closure, never argv or a log (this replaced the local-mode job test)."""
    from secured_support import pipeline_on_the_spark_cluster

    config = scram_node.sasl_config("etl", "etl-secret")
    pipeline_on_the_spark_cluster(
        spark_cluster, monkeypatch, capfd, caplog, tmp_path, config, scram_node.admin_config(), ["etl-secret"]
    )
