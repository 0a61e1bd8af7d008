"""Record formats from the submit operator to the job: the formats and schemas on the job's command
line, the schema registry's settings (its credentials) only in the private file, and the job reading
both back into the ``RecordFormats`` the writer takes."""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_eos.kafka.errors import ConfigError, UsageError
from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats, RegistryConfig
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.spark import job as eos_job

pytestmark = pytest.mark.dag

SECRET = "registry-password-4242"
SCHEMA = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                     "fields": [{"name": "id", "type": "long"}]})
FORMATS = {"value": {"format": "avro", "schema": SCHEMA, "subject_name_strategy": "record"},
           "key": "bytes", "schema_registry_conn_id": "registry_pf"}


@pytest.fixture
def private(monkeypatch, tmp_path):
    monkeypatch.setenv("KAFKA_EOS_PRIVATE_DIR", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EOS_PF", json.dumps(
        {"conn_type": "kafka_eos", "extra": {"bootstrap.servers": "127.0.0.1:9"}}))
    monkeypatch.setenv("AIRFLOW_CONN_REGISTRY_PF", json.dumps(
        {"conn_type": "kafka_eos_schema_registry", "login": "etl", "password": SECRET,
         "extra": {"url": "https://registry.example.com:8081", "timeout_s": 4}}))
    return tmp_path


def _submit(**kwargs):
    defaults = dict(task_id="submit", pipeline_id="orders", topic="orders-out", manifest_base_uri="/tmp/m",
                    application_callable="my_jobs:build", kafka_eos_conn_id="kafka_eos_pf")
    return SparkEosSubmitOperator(**{**defaults, **kwargs})


def _job_formats(argv: list[str], env: dict) -> RecordFormats | None:
    args = eos_job.build_arg_parser().parse_args(argv)
    return eos_job.record_formats_of(args, env)[0]


def test_formats_go_on_the_command_line_and_the_registry_in_the_private_file(private):
    operator = _submit(record_formats=FORMATS)
    args = operator._job_args(7)
    assert SECRET not in " ".join(args) and "registry.example.com" not in " ".join(args)
    assert json.loads(args[args.index("--record-formats") + 1])["value"]["format"] == "avro"
    path = operator._write_client_config()
    try:
        with open(path, encoding="utf-8") as fh:
            assert json.load(fh)["schema_registry"]["basic_auth_password"] == SECRET
        formats = _job_formats(args, {eos_job.CONFIG_FILE_ENV: path})
    finally:
        operator._config_file = path
        operator._remove_config_file()
    assert formats.value.format.value == "avro" and formats.value.schema == SCHEMA
    assert formats.value.subject_name_strategy.value == "record" and not formats.key.uses_registry
    assert formats.registry == RegistryConfig("https://registry.example.com:8081", basic_auth_user="etl",
                                              basic_auth_password=SECRET, timeout_s=4)


def test_bytes_formats_add_nothing(private):
    operator = _submit(record_formats={"key": "bytes"})
    assert "--record-formats" not in operator._job_args(7)
    path = operator._write_client_config()
    try:
        with open(path, encoding="utf-8") as fh:
            assert "schema_registry" not in json.load(fh)
    finally:
        operator._config_file = path
        operator._remove_config_file()


@pytest.mark.parametrize("formats, error, needle", [
    ({"value": {"format": "parquet"}}, ConfigError, "unknown record format 'parquet'"),
    ({"value": {"format": "avro"}}, ConfigError, "needs the writer's schema"),
    ({"value": "avro", "registry": {"url": "http://r"}}, UsageError, "unknown key(s) registry"),
])
def test_bad_formats_are_refused_before_anything_starts(private, formats, error, needle):
    operator = _submit(record_formats=formats)
    with pytest.raises(error) as err:
        operator._validate_arguments()
    assert needle in str(err.value)


def test_the_job_refuses_a_registry_secret_on_its_command_line():
    spec = {"value": {"format": "avro", "schema": SCHEMA},
            "registry": {"url": "https://r.example", "basic_auth_user": "u", "basic_auth_password": SECRET}}
    with pytest.raises(UsageError, match="carries a schema registry secret"):
        _job_formats(_argv(spec), {})


def test_a_job_run_by_hand_takes_a_registry_without_credentials():
    spec = {"value": {"format": "avro", "schema": SCHEMA}, "registry": {"url": "http://127.0.0.1:8081"}}
    formats = _job_formats(_argv(spec), {})
    assert formats.registry.url == "http://127.0.0.1:8081" and formats.value.uses_registry
    assert _job_formats(_argv(None), {}) is None


def _argv(spec: dict | None) -> list[str]:
    argv = ["--pipeline-id", "p", "--topic", "t", "--transactional-id-prefix", "p", "--checkpoint-id", "1",
            "--manifest-base-uri", "/tmp/m", "--application", "m:f"]
    return argv + (["--record-formats", json.dumps(spec)] if spec is not None else [])


def test_the_input_formats_reach_the_job_as_decoders(private):
    operator = _submit(record_formats={"input": {"value": {"format": "avro", "schema": SCHEMA}},
                                       "schema_registry_conn_id": "registry_pf"})
    args = operator._job_args(7)
    assert json.loads(args[args.index("--record-formats") + 1])["input"]["value"]["format"] == "avro"
    path = operator._write_client_config()
    try:
        formats, decoders, _ = eos_job.record_formats_of(eos_job.build_arg_parser().parse_args(args),
                                                      {eos_job.CONFIG_FILE_ENV: path})
    finally:
        operator._config_file = path
        operator._remove_config_file()
    assert not formats.uses_registry and list(decoders) == ["value"]
    assert decoders["value"].registry.basic_auth_password == SECRET  # from the private file only
    with pytest.raises(ConfigError, match="goes with dead_letter_topic"):
        _submit(record_formats={"input": {"value": "avro", "on_poison": "dead-letter"}})._validate_arguments()


def test_the_dead_letter_topic_reaches_the_job_and_may_not_be_the_output_or_an_input(private):
    spec = {"input": {"value": {"format": "avro", "schema": SCHEMA}, "on_poison": "dead-letter",
                      "dead_letter_topic": "orders-dead"}, "schema_registry_conn_id": "registry_pf"}
    operator = _submit(record_formats=spec, input_topics="orders-in", input_group="g", input_start="earliest")
    args = operator._job_args(7)
    path = operator._write_client_config()
    try:
        parsed = eos_job.build_arg_parser().parse_args(args)
        formats = eos_job.record_formats_of(parsed, {eos_job.CONFIG_FILE_ENV: path})
        assert formats[2] == "orders-dead"
        eos_job.check_input_formats(parsed, formats)  # a topic of its own: accepted
        for clash in ("orders-out", "orders-in"):
            with pytest.raises(UsageError, match=f"dead_letter_topic '{clash}' is the output topic"):
                eos_job.check_input_formats(parsed, (*formats[:2], clash))
    finally:
        operator._config_file = path
        operator._remove_config_file()
