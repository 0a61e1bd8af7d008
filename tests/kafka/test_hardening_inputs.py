"""Validation at every edge (issue #13): ids, prefixes, topics and durations; manifests that are
hostile; the CLI's client configuration built from a file, the command line and the environment.

Each of these failed before the fix: a lone surrogate in a manifest was accepted (and later hung
the CLI), a 100k-deep manifest escaped as RecursionError, ``--command-config`` without
``bootstrap.servers`` was refused even with ``--bootstrap-servers``, and the documented password
variable could not supply a password missing from the file.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_eos.cli.options import complete
from airflow_provider_kafka_eos.cli.settings import client_config_of, resolution_request_of
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, read_manifest
from airflow_provider_kafka_eos.kafka.config import SECRET_ENV_VARS, KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import ConfigError, ManifestError, UsageError
from airflow_provider_kafka_eos.kafka.operations.resolution_request import ResolutionRequest
from airflow_provider_kafka_eos.kafka.validation import (
    MAX_KAFKA_STRING_BYTES,
    MAX_PREFIX_BYTES,
    parse_duration_ms,
    validate_prefix,
    validate_topic,
    validate_transactional_id,
)

GOOD_MANIFEST = {
    "schema_version": 4,
    "pipeline_id": "orders",
    "checkpoint_id": 7,
    "transactional_id_prefix": "orders",
    "naming_strategy": "INCREMENTING",
    "topic": "orders",
    "status": "PREPARED",
    "committables": [
        {
            "transactional_id": "orders-0-7",
            "producer_id": 4001,
            "producer_epoch": 3,
            "partitions": [{"topic": "orders", "partition": 0}],
            "record_count": 10,
            "prepared_at_ms": 1_700_000_001_000,
            "transaction_start_ms": 1_700_000_000_000,
            "transaction_timeout_ms": 900_000,
            "transaction_version": 2,
            "end_txn_version": 5,
        }
    ],
    "created_at_ms": 1_700_000_002_000,
    "updated_at_ms": 1_700_000_002_000,
    "prepared_by": None,
    "input": None,
    "decision": None,
}

# -- validators ----------------------------------------------------------------------------------


def test_transactional_id_limits_are_kafkas():
    assert validate_transactional_id("x" * MAX_KAFKA_STRING_BYTES)
    with pytest.raises(UsageError, match="32767 bytes"):
        validate_transactional_id("x" * (MAX_KAFKA_STRING_BYTES + 1))
    # the limit is in UTF-8 bytes, not characters: 10923 three-byte characters are 32769 bytes
    with pytest.raises(UsageError, match="32769 bytes"):
        validate_transactional_id("\u20ac" * 10923)
    with pytest.raises(UsageError, match="must not be empty"):
        validate_transactional_id("")
    with pytest.raises(UsageError, match="must be a string"):
        validate_transactional_id(17)


@pytest.mark.parametrize("bad", ["\ud800", "etl-\udc80-1", "a\udfffb"])
def test_lone_surrogates_are_refused_and_the_message_is_printable(bad):
    with pytest.raises(UsageError, match="lone surrogate") as info:
        validate_transactional_id(bad, field="--transactional-id")
    str(info.value).encode("utf-8")  # the message itself must be writable anywhere


def test_prefix_leaves_room_for_the_naming_suffix():
    assert validate_prefix("p" * MAX_PREFIX_BYTES)
    with pytest.raises(UsageError, match="naming suffix"):
        validate_prefix("p" * (MAX_PREFIX_BYTES + 1))


@pytest.mark.parametrize("bad", ["", ".", "..", "a b", "x" * 250, "t\ud800", "a/b"])
def test_topic_names_follow_kafkas_rule(bad):
    with pytest.raises(UsageError):
        validate_topic(bad)


@pytest.mark.parametrize(
    ("text", "needle"),
    [("0s", "must be positive"), ("0ms", "must be positive"), ("-1s", "negative"), (0, "positive"),
     ("10", "duration like"), ("1e400s", "duration like"), (True, "duration like")],
)
def test_wait_durations_must_be_positive(text, needle):
    with pytest.raises(UsageError, match=needle):
        parse_duration_ms(text, what="--timeout", positive=True)


def test_filter_durations_may_be_zero_but_not_negative():
    assert parse_duration_ms("0s") == 0
    with pytest.raises(UsageError, match="negative"):
        parse_duration_ms(-5)
    with pytest.raises(UsageError, match="too long"):
        parse_duration_ms("30d", what="--timeout", positive=True, max_ms=2**31 - 1)


def test_resolution_request_validates_ids_prefixes_and_topics():
    """The CLI and the manual DAG's Params share this validation."""
    with pytest.raises(UsageError, match=r"--transactional-id .*lone surrogate"):
        ResolutionRequest(action="describe", transactional_id="t\ud800").validate()
    with pytest.raises(UsageError, match="--prefix"):
        ResolutionRequest(action="list", prefixes=("p" * 40000,)).validate()
    with pytest.raises(UsageError, match="--topic"):
        ResolutionRequest(action="preflight", prefixes=("p",), topics=("no such/topic",)).validate()
    with pytest.raises(UsageError, match="--transaction-timeout-ms must be positive"):
        ResolutionRequest(action="preflight", prefixes=("p",), transaction_timeout_ms=0).validate()


# -- manifests -------------------------------------------------------------------------------------


def test_a_lone_surrogate_escape_in_a_manifest_is_a_manifest_error(tmp_path):
    text = json.dumps(GOOD_MANIFEST).replace('"orders-0-7"', '"orders-\\ud800-7"')
    path = tmp_path / "checkpoint-000000000007.json"
    path.write_text(text)
    with pytest.raises(ManifestError, match="lone surrogate"):
        read_manifest(str(path))


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_deeply_nested_json_is_a_manifest_error_not_recursion_error(tmp_path, opener):
    path = tmp_path / "checkpoint-000000000007.json"
    path.write_text(opener * 100_000)
    with pytest.raises(ManifestError, match=r"nested too deeply|not valid JSON"):
        read_manifest(str(path))


def test_huge_integers_and_bytes_are_manifest_errors():
    with pytest.raises(ManifestError):
        Manifest.from_json('{"schema_version": ' + "9" * 10_000 + "}")
    with pytest.raises(ManifestError, match="UTF-8"):
        Manifest.from_json(b"\xff\xfe{}")


def test_manifest_topic_and_prefix_are_validated():
    bad = dict(GOOD_MANIFEST, topic="a topic")
    with pytest.raises(ManifestError, match="field 'topic'"):
        Manifest.from_dict(bad)


# -- client configuration from file + command line + environment -----------------------------------


def _config(tmp_path, argv, env, properties=None):
    if properties is not None:
        path = tmp_path / "client.properties"
        path.write_text(properties)
        argv = [*argv, "--command-config", str(path)]
    return client_config_of(complete(["list", *argv]), env)


def test_command_config_without_bootstrap_combines_with_bootstrap_servers(tmp_path):
    config = _config(
        tmp_path, ["--bootstrap-servers", "b1:9092"], {}, "security.protocol=PLAINTEXT\nclient.id=ops\n"
    )
    assert config.bootstrap_servers == "b1:9092" and config.get("client.id") == "ops"


def test_bootstrap_servers_flag_wins_over_file_and_env_fills_in(tmp_path):
    config = _config(tmp_path, ["--bootstrap-servers", "b1:9092"], {}, "bootstrap.servers=b2:9092\n")
    assert config.bootstrap_servers == "b1:9092"
    config = _config(tmp_path, [], {"KAFKA_BOOTSTRAP_SERVERS": "b3:9092"}, "client.id=ops\n")
    assert config.bootstrap_servers == "b3:9092"
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        _config(tmp_path, [], {}, "client.id=ops\n")


def test_environment_supplies_a_password_missing_from_the_file(tmp_path):
    props = "bootstrap.servers=b1:9092\nsecurity.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=etl\n"
    with pytest.raises(ConfigError, match=r"needs .sasl\.username. and .sasl\.password."):
        _config(tmp_path, [], {}, props)
    config = _config(tmp_path, [], {"KAFKA_EOS_SASL_PASSWORD": "s3cret"}, props)
    assert config.get("sasl.password") == "s3cret"
    assert "s3cret" not in repr(config)


def test_every_secret_key_has_an_environment_variable():
    from airflow_provider_kafka_eos.kafka import config as config_module

    secret_keys = {
        k for k in config_module._CONNECTION_KEYS
        if config_module.is_secret_key(k) and not k.endswith((".location", ".url", ".keytab"))
    }
    assert secret_keys <= set(SECRET_ENV_VARS.values())
    env = {name: f"value-of-{key}" for name, key in SECRET_ENV_VARS.items()}
    assert config_module.settings_from_env(env) == {k: f"value-of-{k}" for k in SECRET_ENV_VARS.values()}


def test_cli_request_refuses_a_lone_surrogate_prefix():
    args = complete(["list", "--prefix", "etl-\udc80"])
    with pytest.raises(UsageError, match="--prefix"):
        resolution_request_of(args)


def test_properties_from_mapping_overrides_are_key_checked(tmp_path):
    with pytest.raises(ConfigError, match=r"not\.a\.key"):
        KafkaClientConfig.from_properties({"bootstrap.servers": "b:1"}, overrides={"not.a.key": 1})
