"""Fixtures for the ``kafka-eos-txn`` tests (helpers live in ``eos_cli_helpers``)."""

from __future__ import annotations

import pytest


@pytest.fixture
def bootstrap(kafka_broker) -> str:
    return kafka_broker.bootstrap
