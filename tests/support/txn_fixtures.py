"""Fixtures for the sensor, trigger and abort-operator tests (helpers live in txn_helpers.py).

A fixture plugin (``pytest_plugins`` in tests/conftest.py): those tests live in tests/sensors,
tests/triggers and tests/operators, beside their modules' mirror.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from txn_helpers import connect_admin, set_kafka_eos_connection

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin


@pytest.fixture
def admin(kafka_broker) -> Iterator[TransactionAdmin]:
    with connect_admin(kafka_broker.bootstrap) as opened:
        yield opened


@pytest.fixture
def empty_store(tmp_path) -> str:
    """An empty manifest store, as a file:// URI."""
    (tmp_path / "connection-store").mkdir()
    return (tmp_path / "connection-store").as_uri()


@pytest.fixture
def kafka_eos_conn(kafka_broker, monkeypatch, empty_store) -> str:
    """``kafka_eos_default`` pointing at the broker, with an (empty) manifest store in its extra."""
    return set_kafka_eos_connection(monkeypatch, kafka_broker.bootstrap, manifest_base_uri=empty_store)
