"""The format settings, the registry connection and subject naming (no server needed)."""

from __future__ import annotations

import json
import pickle

import pytest
from registry_protos import order_message

from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.kafka.registry.config import (
    RecordFormat,
    RegistryConfig,
    SerdeSetting,
    SubjectNameStrategy,
    protobuf_schema,
    subject_name,
)
from airflow_provider_kafka_eos.kafka.registry.wire import wire_header

AVRO = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                   "fields": [{"name": "id", "type": "long"}]})


@pytest.mark.parametrize(("strategy", "is_key", "expected"), [
    ("topic", False, "orders-value"),
    ("topic", True, "orders-key"),
    ("record", False, "shop.Order"),
    ("topic_record", True, "orders-shop.Order"),
])
def test_subject_names_follow_kafkas_serializers(strategy, is_key, expected):
    setting = SerdeSetting(format="avro", schema=AVRO, subject_name_strategy=strategy)
    assert subject_name(setting.subject_name_strategy, "orders", is_key=is_key,
                        record_name=setting.record_name()) == expected


def test_record_names_of_each_format():
    assert SerdeSetting(format="json_schema", schema='{"title": "shop.Order"}').record_name() == "shop.Order"
    proto = SerdeSetting(format="protobuf", schema=protobuf_schema(order_message()))
    assert proto.record_name() == "shop.Order"
    unnamed = SerdeSetting(format="json_schema", schema='{"type": "object"}',
                           subject_name_strategy=SubjectNameStrategy.RECORD)
    with pytest.raises(ConfigError, match="needs the schema's record name"):
        subject_name(unnamed.subject_name_strategy, "orders", is_key=False, record_name=unnamed.record_name())


def test_settings_refuse_what_cannot_work():
    with pytest.raises(ConfigError, match="unknown record format 'parquet'"):
        SerdeSetting(format="parquet")
    with pytest.raises(ConfigError, match="needs the writer's schema"):
        SerdeSetting(format="avro")
    with pytest.raises(ConfigError, match="unknown subject name strategy"):
        SerdeSetting(format="avro", schema=AVRO, subject_name_strategy="TopicNameStrategy")
    assert SerdeSetting().format is RecordFormat.BYTES and not SerdeSetting().uses_registry


def test_registry_secrets_stay_out_of_repr_describe_and_the_url():
    config = RegistryConfig("https://registry.example:8081", basic_auth_user="svc",
                            basic_auth_password="s3cret-pw")
    assert "s3cret-pw" not in repr(config) and "s3cret-pw" not in json.dumps(config.describe())
    assert config.client_conf()["basic.auth.user.info"] == "svc:s3cret-pw"
    assert "s3cret-tok" not in repr(RegistryConfig("https://r.example", bearer_token="s3cret-tok"))
    with pytest.raises(ConfigError, match="carries credentials") as err:
        RegistryConfig("https://svc:pw-in-url@registry.example")
    assert "pw-in-url" not in str(err.value)
    with pytest.raises(ConfigError, match="both basic auth and a bearer token"):
        RegistryConfig("https://r.example", basic_auth_user="a", basic_auth_password="b", bearer_token="t")
    with pytest.raises(ConfigError, match="not an http"):
        RegistryConfig("registry.example:8081")
    with pytest.raises(ConfigError, match=r"unknown schema registry setting.*passwd"):
        RegistryConfig.from_mapping({"url": "https://r.example", "passwd": "x"})


def test_settings_ship_to_executors():
    setting = SerdeSetting(format="avro", schema=AVRO, auto_register=True)
    assert pickle.loads(pickle.dumps(setting)) == setting


def test_wire_header_is_magic_byte_and_big_endian_id():
    assert wire_header(0x01020304) == b"\x00\x01\x02\x03\x04"
    assert wire_header(7, protobuf_indexes=(0,)) == b"\x00\x00\x00\x00\x07\x00"
    # [1, 2]: count 2 then 1 and 2, each zig-zag encoded (2n)
    assert wire_header(7, protobuf_indexes=(1, 2)) == b"\x00\x00\x00\x00\x07\x04\x02\x04"


def test_protobuf_schemas_are_descriptors_without_imports():
    with pytest.raises(ConfigError, match="not a base64 FileDescriptorProto"):
        SerdeSetting(format="protobuf", schema='syntax = "proto3"; message A {}').record_name()
    with pytest.raises(ConfigError, match=r"imports google/protobuf/timestamp\.proto"):
        protobuf_schema(order_message(imports_timestamp=True))
