"""A Confluent-API-compatible Schema Registry (Apicurio, ``kafka_eos_testing/schema_registry.py``).

Session scoped: the server takes 5-17 s to start, so it starts once, on the first test that asks
for it, and every module shares it (each test uses its own subjects, ``registry_subject``).
A fixture plugin (``pytest_plugins`` in tests/conftest.py).
"""

from __future__ import annotations

import pytest

from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.schema_registry import SchemaRegistryServer


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory):
    with SchemaRegistryServer(log_path=tmp_path_factory.mktemp("registry") / "apicurio.log") as server:
        yield server


@pytest.fixture
def registry_topic() -> str:
    """A topic name no other test uses, so its ``<topic>-value`` subject starts empty."""
    return unique_name("reg")
