"""pytest plugin: the ``kafka_broker`` fixture (embedded broker, or KAFKA_BOOTSTRAP_SERVERS).

The embedded broker runs as a subprocess (``kafka-eos-devbroker``), exactly as a user would
start it, so tests exercise the real TCP path and a test can restart or kill it. When
``KAFKA_BOOTSTRAP_SERVERS`` is set the same tests run against that real cluster instead;
anything that needs to reconfigure or restart the broker then skips, naming what it needs.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_kafka_eos.testing.embedded import (
    BOOTSTRAP_ENV,
    BrokerHandle,
    EmbeddedBroker,
    broker_command,
    start_embedded_broker,
    unique_name,
)

__all__ = ["BrokerHandle", "EmbeddedBroker", "broker_command", "start_embedded_broker", "unique_name"]


_FACTORY_STARTED = "_kafka_eos_brokers"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """On a failure, attach the tail of each embedded broker's log the test used (what went wrong there)."""
    outcome = yield
    report = outcome.get_result()
    if report.passed or report.skipped:
        return
    funcargs = getattr(item, "funcargs", {})
    brokers = [funcargs.get("kafka_broker"), *getattr(item, _FACTORY_STARTED, [])]
    for broker in brokers:
        if isinstance(broker, EmbeddedBroker):
            report.sections.append((f"kafka-eos-devbroker log ({broker.log_path})", broker.log_tail()))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHandle]:
    """The session's broker: embedded (persistent data dir, so restart() keeps data) or the real one."""
    bootstrap = os.environ.get(BOOTSTRAP_ENV)
    if bootstrap:
        yield BrokerHandle(bootstrap, embedded=False, config={})
        return
    base = tmp_path_factory.mktemp("kafka-broker")
    broker = EmbeddedBroker({"data_dir": str(base / "data")}, str(base / "broker.log"))
    try:
        yield broker
    finally:
        _collect_clients()
        broker.stop()


@pytest.fixture
def kafka_broker_factory(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """``factory(**options)`` starts a dedicated broker with other settings; stopped after the test."""
    started: list[EmbeddedBroker] = []
    setattr(request.node, _FACTORY_STARTED, started)

    def factory(**options: Any) -> EmbeddedBroker:
        if os.environ.get(BOOTSTRAP_ENV):
            wanted = ", ".join(f"{k}={v}" for k, v in options.items()) or "a dedicated broker"
            pytest.skip(f"needs {wanted}: the real cluster at ${BOOTSTRAP_ENV} cannot be reconfigured")
        base = tmp_path_factory.mktemp("kafka-broker")
        broker = EmbeddedBroker(options, str(base / "broker.log"))
        started.append(broker)
        return broker

    yield factory
    _collect_clients()
    for broker in started:
        broker.stop()


def _collect_clients() -> None:
    """Let unreachable Kafka clients die while their broker still answers.

    A test's producer caught in a reference cycle lives until the next garbage collection; if
    that comes after the broker stopped, librdkafka keeps dialling the dead port and fills the
    end of the test output with connection errors.
    """
    gc.collect()


@pytest.fixture(name="unique_name")
def unique_name_fixture():
    """The :func:`unique_name` function, as a fixture: ``unique_name("orders")``."""
    return unique_name
