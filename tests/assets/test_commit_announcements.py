"""What the world hears about a commit: OpenLineage facets, Airflow Stats metrics, the Asset URI.

Real parts: the embedded broker, real open transactions, the real commit / abort operators and
the lingering scan, the OpenLineage provider's own extraction (``ExtractorManager``) and Airflow's
own Stats module. The one stand-in is the metrics *backend* behind Stats (an in-memory recorder
given to ``Stats.initialize``): no StatsD server package is installable here, and the backend is
exactly the boundary Airflow lets a deployment choose.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from txn_helpers import connect_admin, produce_in_transaction, set_kafka_eos_connection, states

from airflow_provider_kafka_eos.assets.lineage import kafka_asset_uri, kafka_namespace
from airflow_provider_kafka_eos.kafka.operations.scan import ScanSpec
from airflow_provider_kafka_eos.operators.abort import KafkaAbortTransactionsOperator
from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator
from airflow_provider_kafka_eos.tasks import metrics
from airflow_provider_kafka_eos.triggers.lingering import scan_with_connection
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.transactions import write_prepared_manifest

pytestmark = [pytest.mark.broker, pytest.mark.provider_logic]  # Asset events: Airflow's side


class RecordingBackend:
    """A StatsLogger that remembers every call (the metrics backend Airflow would hand to StatsD)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float, dict]] = []

    def incr(self, stat, count=1, rate=1, *, tags=None):
        self.calls.append(("incr", stat, count, dict(tags or {})))

    def decr(self, stat, count=1, rate=1, *, tags=None):
        self.calls.append(("decr", stat, count, dict(tags or {})))

    def gauge(self, stat, value, rate=1, delta=False, *, tags=None):
        self.calls.append(("gauge", stat, value, dict(tags or {})))

    def timing(self, stat, dt, *, tags=None):
        self.calls.append(("timing", stat, dt, dict(tags or {})))

    def named(self, stat: str) -> list[tuple[str, str, float, dict]]:
        return [c for c in self.calls if c[1] == stat]


@pytest.fixture
def recorded_metrics(monkeypatch) -> RecordingBackend:
    from airflow.sdk._shared.observability.metrics import stats as stats_module

    backend = RecordingBackend()
    for name in ("_factory", "_backend", "_export_legacy_names"):  # restored after the test
        monkeypatch.setattr(stats_module, name, getattr(stats_module, name))
    stats_module.initialize(factory=lambda: backend, export_legacy_names=False)
    return backend


@pytest.fixture
def prepared(kafka_broker, monkeypatch, tmp_path):
    """Two open transactions under a fresh prefix, one listed in a PREPARED manifest, one orphaned."""
    conn_id = set_kafka_eos_connection(monkeypatch, kafka_broker.bootstrap)
    prefix, topic = unique_name("announce") + "-", unique_name("topic")
    pending, orphan = f"{prefix}0", f"{prefix}1"
    produce_in_transaction(kafka_broker.bootstrap, pending, topic, ["p1"], commit=False)
    produce_in_transaction(kafka_broker.bootstrap, orphan, topic, ["o1"], commit=False)
    with connect_admin(kafka_broker.bootstrap) as admin:
        uri = write_prepared_manifest(admin, tmp_path.as_uri(), "orders", topic, [pending], prefix=prefix)
        yield SimpleNamespace(conn_id=conn_id, prefix=prefix, topic=topic, pending=pending, orphan=orphan,
                              uri=uri, admin=admin, base=tmp_path.as_uri())
        leftovers = [t for t, s in states(admin, [pending, orphan]).items() if s == "Ongoing"]
        admin.abort(leftovers)


def test_names_follow_openlineage_kafka_naming():
    assert kafka_namespace("PLAINTEXT://b1:9092, b2:9092") == "kafka://b1:9092"
    assert kafka_asset_uri("b1:9092,b2:9092", "orders") == "kafka://b1:9092/orders"
    with pytest.raises(ValueError, match=r"bootstrap\.servers is empty"):
        kafka_namespace(" , ")


def test_the_commit_reports_its_topic_to_openlineage_and_its_metrics_to_stats(
    kafka_broker, prepared, recorded_metrics
):
    from airflow.providers.openlineage.extractors.manager import ExtractorManager
    from airflow.utils.state import TaskInstanceState

    operator = KafkaCommitTransactionsOperator(
        task_id="commit", manifest_uri=prepared.uri, kafka_eos_conn_id=prepared.conn_id
    )
    report = operator.execute({})
    assert report["outcomes"] == {"committed": 1}

    lineage = ExtractorManager().extract_metadata(
        dagrun=SimpleNamespace(run_id="manual__1"),
        task=operator,
        task_instance_state=TaskInstanceState.SUCCESS,
        task_instance=SimpleNamespace(task=operator, dag_id="eos_pipeline", task_id="commit"),
    )
    assert [(d.namespace, d.name) for d in lineage.outputs] == [
        (f"kafka://{kafka_broker.bootstrap.split(',')[0]}", prepared.topic)
    ]
    assert lineage.inputs == []

    tags = {"pipeline_id": "orders", "topic": prepared.topic}
    assert [c[3] for c in recorded_metrics.named(metrics.COMMIT_LATENCY)] == [tags]
    assert recorded_metrics.named(metrics.TRANSACTIONS_COMMITTED) == [
        ("incr", metrics.TRANSACTIONS_COMMITTED, 1, tags)
    ]

    recorded_metrics.calls.clear()
    again = operator.execute({})  # a rerun: the manifest is COMMITTED, nothing new
    assert again["already_committed"] is True
    assert recorded_metrics.named(metrics.TRANSACTIONS_COMMITTED) == []


def test_scans_and_aborts_report_what_they_found_and_did(prepared, recorded_metrics):
    spec = ScanSpec(
        min_age_ms=0,
        prefixes=(prepared.prefix,),
        owned_prefixes=(prepared.prefix,),
        manifest_base_uri=prepared.base,
    )
    found = scan_with_connection(prepared.conn_id, spec)
    assert len(found.transactions) == 2
    assert recorded_metrics.named(metrics.LINGERING_FOUND) == [("gauge", metrics.LINGERING_FOUND, 2, {})]
    assert recorded_metrics.named(metrics.LSO_OLDEST_STALL_AGE) == [
        ("gauge", metrics.LSO_OLDEST_STALL_AGE, 0, {})  # no LSO partitions watched: no stall
    ]

    KafkaAbortTransactionsOperator(
        task_id="abort",
        kafka_eos_conn_id=prepared.conn_id,
        transactional_ids=[prepared.orphan],
        owned_prefixes=[prepared.prefix],
        manifest_base_uri=prepared.base,
    ).execute({})
    assert recorded_metrics.named(metrics.TRANSACTIONS_ABORTED) == [
        ("incr", metrics.TRANSACTIONS_ABORTED, 1, {})
    ]
