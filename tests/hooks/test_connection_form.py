"""The ``kafka_eos`` connection form: what Airflow's API server sends the UI, and what the hook reads back.

The form metadata is read through Airflow 3.3's own ``HookMetaService`` (the code behind
``GET /ui/connections/hook_meta`` that the React form renders); extras are given as real Airflow
connections (``AIRFLOW_CONN_<ID>`` JSON). The Test button is exercised against the embedded broker.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_eos.hooks import connection_form as form
from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
from airflow_provider_kafka_eos.kafka.errors import ConfigError

PROTOCOLS = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SECRET = "form-secret-that-must-not-leak"


def _conn(monkeypatch, conn_id: str, **fields) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka_eos", **fields}))
    return conn_id


def _form_extra(**values) -> dict:
    """An extra as the 3.3 form saves it: every field present, ``null`` where left blank."""
    return {**dict.fromkeys(form.FIELDS), **values}


@pytest.fixture(scope="module")
def hook_meta() -> dict:
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    metas = {m.connection_type: m for m in HookMetaService.hook_meta_data()}
    return metas["kafka_eos"].model_dump()


def test_the_form_has_a_titled_described_field_for_every_setting(hook_meta):
    fields = hook_meta["extra_fields"]
    assert list(fields) == list(form.FIELDS)
    expected = {
        "bootstrap.servers", "security.protocol", "sasl.mechanisms", "ssl.ca.location",
        "ssl.certificate.location", "ssl.key.location", "manifest_base_uri", "two_phase_commit",
        "transaction_timeout_ms",
    }
    assert set(fields) == expected
    for name, field in fields.items():
        assert field["schema"]["title"], name
        assert field["description"] and len(field["description"]) > 20, name
    assert fields["security.protocol"]["schema"]["enum"] == [None, *PROTOCOLS]
    assert "SCRAM-SHA-512" in fields["sasl.mechanisms"]["schema"]["enum"]
    assert fields["two_phase_commit"]["schema"]["type"] == ["boolean", "null"]
    assert fields["transaction_timeout_ms"]["schema"]["type"] == ["integer", "null"]
    # The 3.3 form shows schema "examples" as the field's suggestions (its placeholder).
    assert fields["bootstrap.servers"]["schema"]["examples"] == ["broker1:9092,broker2:9092"]
    assert fields["manifest_base_uri"]["schema"]["examples"][0].startswith("s3://")


def test_standard_fields_show_masked_sasl_credentials_and_hide_host_and_port(hook_meta):
    std = hook_meta["standard_fields"]
    assert std["host"]["hidden"] and std["port"]["hidden"] and std["url_schema"]["hidden"]
    assert std["login"] == {"hidden": False, "title": "SASL username", "placeholder": "etl (SASL only)"}
    assert std["password"]["hidden"] is False and std["password"]["title"] == "SASL password"


def test_legacy_widgets_for_airflow_3_1_match_the_fields():
    """Airflow 3.1 renders ``get_connection_form_widgets`` with its mocked WTForms (the 3.3 mocks here)."""
    import sys
    from unittest import mock

    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService as H

    mocked = {name: mock.MagicMock() for name in ("wtforms", "wtforms.validators", "flask_babel",
                                                  "flask_appbuilder", "flask_appbuilder.fieldwidgets")}
    with (
        mock.patch.dict(sys.modules, mocked), mock.patch("wtforms.StringField", H.MockStringField),
        mock.patch("wtforms.IntegerField", H.MockIntegerField),
        mock.patch("wtforms.BooleanField", H.MockBooleanField),
        mock.patch("flask_babel.lazy_gettext", lambda text: text),
        mock.patch("flask_appbuilder.fieldwidgets.BS3TextFieldWidget", H.MockAnyWidget),
        mock.patch("wtforms.validators.Optional", H.MockOptional),
        mock.patch("wtforms.validators.any_of", H.MockEnum),
    ):
        widgets = {name: w.param.dump() for name, w in KafkaEosHook.get_connection_form_widgets().items()}
    assert list(widgets) == list(form.FIELDS)
    assert widgets["bootstrap.servers"]["schema"]["title"] == "Bootstrap servers"
    assert widgets["security.protocol"]["schema"]["enum"] == PROTOCOLS
    assert widgets["transaction_timeout_ms"]["schema"]["type"] == ["integer", "null"]
    assert widgets["two_phase_commit"]["schema"]["type"] == ["boolean", "null"]
    assert KafkaEosHook.get_ui_field_behaviour()["relabeling"]["password"] == "SASL password"


def test_a_form_made_connection_becomes_the_client_config(monkeypatch, tmp_path):
    conn_id = _conn(
        monkeypatch,
        "eos_form",
        login="etl",
        password=SECRET,
        extra=_form_extra(**{
            "bootstrap.servers": "b1:9092,b2:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "ssl.ca.location": "/etc/kafka/ca.pem",
            "manifest_base_uri": tmp_path.as_uri(),
            "two_phase_commit": False,
            "transaction_timeout_ms": 600000,
        }),
    )
    hook = KafkaEosHook(conn_id)
    settings = hook.client_config().confluent()
    assert settings["bootstrap.servers"] == "b1:9092,b2:9092"
    assert settings["sasl.mechanisms"] == "SCRAM-SHA-512"
    assert settings["sasl.username"] == "etl" and settings["sasl.password"] == SECRET
    assert settings["ssl.ca.location"] == "/etc/kafka/ca.pem"
    assert not set(form.PROVIDER_KEYS) & set(settings)  # ours never reach the Kafka client
    assert "ssl.key.location" not in settings  # a blank field is "not set", not ""
    assert hook.manifest_base_uri() == tmp_path.as_uri()
    assert hook.two_phase_commit() is False and hook.transaction_timeout_ms() == 600000


def test_an_existing_json_extra_keeps_working_and_fills_the_form(monkeypatch, hook_meta):
    """A ``kafka`` connection's extra pasted as is: Java spelling, string values from a URI."""
    conn_id = _conn(
        monkeypatch,
        "eos_json",
        extra={
            "bootstrap.servers": "b:9093",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "etl",
            "sasl.password": SECRET,
            "linger.ms": 5,
            "manifest_base_uri": "s3://bucket/kafka-eos/manifests",
            "two_phase_commit": "true",
            "transaction_timeout_ms": "900000",
        },
    )
    hook = KafkaEosHook(conn_id)
    settings = hook.client_config().confluent()
    assert settings["sasl.mechanisms"] == "PLAIN" and settings["sasl.password"] == SECRET
    assert settings["linger.ms"] == 5
    assert hook.manifest_base_uri() == "s3://bucket/kafka-eos/manifests"
    assert hook.two_phase_commit() is True and hook.transaction_timeout_ms() == 900000
    # The extra's keys are the form's field names, so the form opens with these values filled in.
    assert {"bootstrap.servers", "security.protocol", "manifest_base_uri"} <= set(hook_meta["extra_fields"])


def test_java_and_librdkafka_mechanism_spellings_must_agree(monkeypatch):
    conn_id = _conn(
        monkeypatch, "eos_mech",
        extra=_form_extra(**{"bootstrap.servers": "b:9092", "sasl.mechanism": "PLAIN",
                             "sasl.mechanisms": "SCRAM-SHA-256"}),
    )
    with pytest.raises(ConfigError) as err:
        KafkaEosHook(conn_id).client_config()
    assert "sasl.mechanism 'PLAIN' and sasl.mechanisms 'SCRAM-SHA-256' disagree" in str(err.value)
    assert "eos_mech" in str(err.value)


@pytest.mark.parametrize(
    "uri, why",
    [
        ("manifests/here", "neither an absolute path nor a URL"),
        ("s3:/bucket/x", "neither an absolute path nor a URL"),
        ("s4://bucket/x", "unknown scheme 's4'"),
        ("s3://", "names no location"),
        ("/var/lib/kafka eos", "contains whitespace"),
    ],
)
def test_a_malformed_manifest_store_uri_is_named(monkeypatch, uri, why):
    conn_id = _conn(monkeypatch, "eos_uri", extra={"bootstrap.servers": "b:9092", "manifest_base_uri": uri})
    with pytest.raises(ConfigError) as err:
        KafkaEosHook(conn_id).manifest_base_uri()
    assert why in str(err.value) and "manifest_base_uri" in str(err.value) and "eos_uri" in str(err.value)
    ok, message = KafkaEosHook(conn_id).test_connection()  # the Test button names it before connecting
    assert not ok and why in message


@pytest.mark.parametrize(
    "key, value, why",
    [
        ("two_phase_commit", "yes", "two_phase_commit must be true or false"),
        ("transaction_timeout_ms", -5, "transaction_timeout_ms must be a positive integer"),
        ("transaction_timeout_ms", "15m", "transaction_timeout_ms must be a positive integer"),
    ],
)
def test_malformed_provider_settings_are_refused_by_name(monkeypatch, key, value, why):
    conn_id = _conn(monkeypatch, "eos_keys", extra={"bootstrap.servers": "b:9092", key: value})
    ok, message = KafkaEosHook(conn_id).test_connection()
    assert not ok and why in message and "eos_keys" in message


@pytest.mark.broker
def test_the_test_button_reports_capabilities_and_the_store(kafka_broker, monkeypatch, tmp_path):
    conn_id = _conn(
        monkeypatch, "eos_form_ok",
        extra=_form_extra(
            **{"bootstrap.servers": kafka_broker.bootstrap, "manifest_base_uri": tmp_path.as_uri()}
        ),
    )
    ok, message = KafkaEosHook(conn_id).test_connection()
    assert ok, message
    assert message.startswith(f"Connected to {kafka_broker.bootstrap}: transaction.version ")
    assert f"manifest store {tmp_path.as_uri()}: readable" in message
    missing = (tmp_path / "not-yet").as_uri()
    _conn(monkeypatch, "eos_form_new",
          extra=_form_extra(**{"bootstrap.servers": kafka_broker.bootstrap, "manifest_base_uri": missing}))
    ok, message = KafkaEosHook("eos_form_new").test_connection()
    assert ok and f"manifest store {missing}: does not exist yet" in message


@pytest.mark.broker
def test_the_test_button_fails_when_the_cluster_refuses_the_stated_timeout(kafka_broker_factory, monkeypatch):
    broker = kafka_broker_factory(transaction_max_timeout_ms=60_000)
    conn_id = _conn(
        monkeypatch, "eos_form_timeout",
        extra=_form_extra(**{"bootstrap.servers": broker.bootstrap, "transaction_timeout_ms": 900_000}),
    )
    ok, message = KafkaEosHook(conn_id).test_connection()
    assert not ok
    assert "transaction_timeout_ms 900000 exceeds the brokers' transaction.max.timeout.ms 60000" in message
    assert message.startswith(f"Connected to {broker.bootstrap}")  # the summary still comes first


@pytest.mark.broker
def test_the_test_button_checks_2pc_when_the_connection_asks_for_it(
    kafka_broker, kafka_broker_factory, monkeypatch
):
    conn_id = _conn(
        monkeypatch, "eos_form_2pc",
        extra=_form_extra(**{"bootstrap.servers": kafka_broker.bootstrap, "two_phase_commit": True}),
    )
    ok, message = KafkaEosHook(conn_id).test_connection()
    assert not ok and "two_phase_commit is on but the brokers" in message
    broker = kafka_broker_factory(two_phase_commit=True)
    _conn(monkeypatch, "eos_form_2pc_on",
          extra=_form_extra(**{"bootstrap.servers": broker.bootstrap, "two_phase_commit": True}))
    ok, message = KafkaEosHook("eos_form_2pc_on").test_connection()
    assert ok and "2PC advertised yes" in message, message


def _preflight(hook: KafkaEosHook, *, timeout_ms: int, two_phase: bool = False):
    from datetime import timedelta

    from airflow_provider_kafka_eos.kafka.operations.preflight import RetrySchedule

    return hook.preflight(
        transactional_id_prefix="stated", topics=["stated-topic"], transaction_timeout_ms=timeout_ms,
        job_duration_budget=timedelta(minutes=5), two_phase_commit=two_phase,
        commit_schedule=RetrySchedule.of(
            retries=3, retry_delay=timedelta(minutes=1), retry_exponential_backoff=2.0,
            execution_timeout=timedelta(minutes=1),
        ),
    )


@pytest.mark.parametrize(
    "stated, pipeline_timeout, pipeline_2pc, why",
    [
        (
            {"transaction_timeout_ms": 600_000}, 900_000, False,
            "the pipeline's transaction_timeout_ms 900000 differs from the transaction_timeout_ms 600000",
        ),
        (
            {"two_phase_commit": True}, 600_000, False,
            "states two_phase_commit, but this pipeline runs without it",
        ),
    ],
)
def test_preflight_refuses_a_pipeline_that_contradicts_its_connection(
    monkeypatch, stated, pipeline_timeout, pipeline_2pc, why
):
    # 127.0.0.1:1: had the check not come first, the error would be BrokerUnreachableError.
    conn_id = _conn(monkeypatch, "eos_stated", extra={"bootstrap.servers": "127.0.0.1:1", **stated})
    with pytest.raises(ConfigError) as err:
        hook = KafkaEosHook(conn_id, connect_timeout_ms=1000)
        _preflight(hook, timeout_ms=pipeline_timeout, two_phase=pipeline_2pc)
    assert why in str(err.value) and "eos_stated" in str(err.value)


@pytest.mark.broker
def test_preflight_goes_on_when_the_pipeline_matches_its_connection(kafka_broker, monkeypatch):
    from airflow_provider_kafka_eos.kafka.errors import PreflightError

    conn_id = _conn(monkeypatch, "eos_stated_ok",
                    extra={"bootstrap.servers": kafka_broker.bootstrap, "transaction_timeout_ms": 600_000})
    with pytest.raises(PreflightError) as err:  # the cluster check ran: its window finding, not ours
        _preflight(KafkaEosHook(conn_id), timeout_ms=600_000)
    assert "vs transaction.timeout.ms = 600s" in str(err.value)
