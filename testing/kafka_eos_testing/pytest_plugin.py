"""pytest plugin: the ``kafka_broker`` fixtures, on the Kafka chosen for this run.

Which Kafka the tests talk to (``$KAFKA_EOS_TEST_KAFKA``):

- ``embedded`` (default): the embedded broker, ``kafka-eos-devbroker`` in a subprocess, exactly
  as a user would start it, so tests exercise the real TCP path and can restart or kill it;
- ``apache``: a real Apache Kafka 4.4 single node (``kafka_eos_testing/apache_kafka``, jars from Maven);
- ``apache3``: a real Apache Kafka 4.4 cluster of three combined broker+controller nodes;
- ``KAFKA_BOOTSTRAP_SERVERS`` set: that external cluster (it wins over the above); anything
  that must reconfigure or restart the broker then skips, naming what it needs.

``--kafka-facing`` keeps only the tests that use a Kafka fixture, and the launcher's own tests
(marker ``apache_kafka``): what ``./run test`` runs on real Kafka 4.4, the proof. Tests marked
``provider_logic`` use a broker but prove a rule of the provider's own (e.g. the input claims in
the manifest store) that no broker changes: one run on the embedded broker proves them, so
``--kafka-facing`` leaves them out (CI time).

``--kafka-facing-elsewhere`` is its complement, for the embedded pass of a run whose real-Kafka pass
runs the Kafka-facing tests: it leaves out every test ``--kafka-facing`` keeps, except the embedded
broker's own tests (marker ``broker_double``: they hold the double to what the same tests prove on
real Kafka, the fidelity pass). One run proves a provider rule; running it on the embedded broker
as well only cost CI time.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafka_eos_testing.embedded import (
    BOOTSTRAP_ENV,
    BrokerHandle,
    EmbeddedBroker,
    broker_command,
    start_embedded_broker,
    unique_name,
)

__all__ = [
    "KAFKA_KIND_ENV",
    "BrokerHandle",
    "EmbeddedBroker",
    "broker_command",
    "kafka_kind",
    "needs_embedded_broker",
    "start_embedded_broker",
    "unique_name",
]

KAFKA_KIND_ENV = "KAFKA_EOS_TEST_KAFKA"
KAFKA_KINDS = ("embedded", "apache", "apache3")
KAFKA_FIXTURES = frozenset({"kafka_broker", "kafka_broker_factory", "kafka_broker_pool"})
_FACTORY_STARTED = "_kafka_eos_brokers"
_POOL_USED = "_kafka_eos_pooled_brokers"


def kafka_kind() -> str:
    """``embedded``, ``apache``, ``apache3`` or ``external`` (``KAFKA_BOOTSTRAP_SERVERS`` is set)."""
    if os.environ.get(BOOTSTRAP_ENV):
        return "external"
    kind = os.environ.get(KAFKA_KIND_ENV, "embedded").strip().lower() or "embedded"
    if kind not in KAFKA_KINDS:
        raise pytest.UsageError(f"${KAFKA_KIND_ENV}={kind!r}: expected one of {', '.join(KAFKA_KINDS)}")
    return kind


def needs_embedded_broker(broker: BrokerHandle | None, capability: str) -> None:
    """Skip unless ``broker`` is the embedded one; ``capability`` says what real Kafka lacks.

    Use it for tests of the embedded broker's own machinery (its journal, its fault hooks):
    ``needs_embedded_broker(kafka_broker, "the embedded broker's journal inspection")``.
    """
    if broker is None or not broker.embedded:
        pytest.skip(f"needs {capability} (not available on {kafka_kind()} Kafka)")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kafka-facing",
        action="store_true",
        default=False,
        help="run only tests that use a Kafka fixture (kafka_broker, kafka_broker_factory, "
        "kafka_broker_pool)",
    )
    parser.addoption(
        "--kafka-facing-elsewhere",
        action="store_true",
        default=False,
        help="leave out the tests --kafka-facing keeps (another pass runs them on real Kafka), except "
        "the embedded broker's own tests (marker broker_double)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    return f"kafka under test: {kafka_kind()} (${KAFKA_KIND_ENV}, ${BOOTSTRAP_ENV})"


def runs_on_real_kafka(item: pytest.Item) -> bool:
    """Whether ``--kafka-facing`` keeps ``item``: the one rule both options apply."""
    kafka_facing = KAFKA_FIXTURES & set(getattr(item, "fixturenames", ()))
    wanted = kafka_facing and not item.get_closest_marker("provider_logic")
    return bool(wanted or item.get_closest_marker("apache_kafka"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    only, elsewhere = config.getoption("--kafka-facing"), config.getoption("--kafka-facing-elsewhere")
    if only and elsewhere:
        raise pytest.UsageError("--kafka-facing and --kafka-facing-elsewhere select opposite halves: "
                                "give one")
    if not (only or elsewhere):
        return
    keep, drop = [], []
    for item in items:
        if only:
            wanted = runs_on_real_kafka(item)
        else:
            wanted = not runs_on_real_kafka(item) or (
                item.get_closest_marker("broker_double") is not None
                and item.get_closest_marker("apache_kafka") is None
            )
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """On a failure, attach the tail of each broker log the test used (what went wrong there)."""
    outcome = yield
    report = outcome.get_result()
    if report.passed or report.skipped:
        return
    funcargs = getattr(item, "funcargs", {})
    brokers = [funcargs.get("kafka_broker"), *getattr(item, _FACTORY_STARTED, []),
               *getattr(item, _POOL_USED, [])]
    for broker in brokers:
        if isinstance(broker, EmbeddedBroker):
            report.sections.append((f"kafka-eos-devbroker log ({broker.log_path})", broker.log_tail()))
        elif broker is not None and getattr(broker, "kind", "") == "apache":
            report.sections.append((f"Apache Kafka logs ({broker.data_dir})", broker.log_tail(20)))


def _start_apache(options: dict[str, Any], kind: str) -> BrokerHandle:
    from kafka_eos_testing.apache_kafka import ApacheKafkaCluster, UnsupportedOption

    try:
        return ApacheKafkaCluster({"nodes": 3 if kind == "apache3" else 1, **options})
    except UnsupportedOption as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHandle]:
    """The session's broker (persistent data dir, so restart() keeps data), of ``kafka_kind()``."""
    kind = kafka_kind()
    if kind == "external":
        yield BrokerHandle(os.environ[BOOTSTRAP_ENV], embedded=False, config={})
        return
    base = tmp_path_factory.mktemp("kafka-broker")
    if kind == "embedded":
        broker: BrokerHandle = EmbeddedBroker({"data_dir": str(base / "data")}, str(base / "broker.log"))
    else:
        broker = _start_apache({"data_dir": str(base / "data")}, kind)
    try:
        yield broker
    finally:
        _collect_clients()
        broker.stop()


@pytest.fixture
def kafka_broker_factory(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """``factory(**options)`` starts a dedicated broker with other settings; stopped after the test.

    The options are the embedded broker's (``kafka_eos_testing/embedded.py``); on Apache Kafka they map to
    broker configs (``kafka_eos_testing/apache_kafka/options.py``) and one Kafka cannot have skips the test.
    """
    started: list[BrokerHandle] = []
    setattr(request.node, _FACTORY_STARTED, started)
    kind = kafka_kind()

    def factory(**options: Any) -> BrokerHandle:
        if kind == "external":
            wanted = ", ".join(f"{k}={v}" for k, v in options.items()) or "a dedicated broker"
            pytest.skip(f"needs {wanted}: the real cluster at ${BOOTSTRAP_ENV} cannot be reconfigured")
        base = tmp_path_factory.mktemp("kafka-broker")
        if kind == "embedded":
            broker: BrokerHandle = EmbeddedBroker(options, str(base / "broker.log"))
        else:
            broker = _start_apache({"data_dir": str(base / "data"), **options}, kind)
        started.append(broker)
        return broker

    yield factory
    _collect_clients()
    for broker in started:
        broker.stop()


@pytest.fixture(scope="module")
def _kafka_broker_pool_brokers() -> Iterator[dict[tuple[tuple[str, str], ...], BrokerHandle]]:
    """The brokers ``kafka_broker_pool`` started in this module, by option set; stopped after it."""
    brokers: dict[tuple[tuple[str, str], ...], BrokerHandle] = {}
    yield brokers
    _collect_clients()
    for broker in brokers.values():
        broker.stop()


@pytest.fixture
def kafka_broker_pool(_kafka_broker_pool_brokers: dict, tmp_path_factory: pytest.TempPathFactory,
                      request: pytest.FixtureRequest) -> Callable[..., BrokerHandle]:
    """``pool(**options)``: the module's broker with these options, started on first use (CI time).

    For tests that need settings the session broker lacks but not a broker of their own: every
    test of the module asking the same options gets the same broker (each on its own topics and
    transactional ids), so a module pays one start-up (a JVM and a KRaft format on Apache Kafka)
    instead of one per test. It keeps its data across ``restart()`` (it always has a data dir),
    and one found stopped is started again. A test that reads the broker's log, counts what it
    holds, or needs a state no earlier test touched keeps ``kafka_broker_factory``. A failing
    test's report shows the pooled broker's log tail, as for the factory's.
    """
    kind = kafka_kind()
    brokers = _kafka_broker_pool_brokers
    used: list[BrokerHandle] = []
    setattr(request.node, _POOL_USED, used)

    def pool(**options: Any) -> BrokerHandle:
        if kind == "external":
            wanted = ", ".join(f"{k}={v}" for k, v in options.items()) or "a dedicated broker"
            pytest.skip(f"needs {wanted}: the real cluster at ${BOOTSTRAP_ENV} cannot be reconfigured")
        if "data_dir" in options:
            raise pytest.UsageError("kafka_broker_pool gives each broker its own data dir; "
                                    "a test that needs its own uses kafka_broker_factory")
        key = tuple(sorted((name, repr(value)) for name, value in options.items()))
        broker = brokers.get(key)
        if broker is not None and not broker.running():
            broker.start()  # an earlier test stopped it (or a restart failed half way)
        if broker is None:
            base = tmp_path_factory.mktemp("kafka-broker-pool")
            options = {"data_dir": str(base / "data"), **options}
            if kind == "embedded":
                broker = EmbeddedBroker(options, str(base / "broker.log"))
            else:
                broker = _start_apache(options, kind)
            brokers[key] = broker
        used.append(broker)
        return broker

    return pool


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
