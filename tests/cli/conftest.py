"""Fixtures for the ``kafka-eos-txn`` tests (helpers live in ``eos_cli_helpers``)."""

from __future__ import annotations

import pytest


@pytest.fixture
def bootstrap(kafka_broker) -> str:
    return kafka_broker.bootstrap


@pytest.fixture
def store(tmp_path) -> str:
    """An empty manifest store (every abort reads one first), as a file:// URI."""
    base = tmp_path / "manifests"
    base.mkdir()
    return base.as_uri()
