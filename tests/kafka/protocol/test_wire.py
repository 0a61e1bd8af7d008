"""Pin the kafka-python internals ``kafka/protocol/wire.py`` relies on, so an upgrade that moves them fails
here (with the name of what moved) instead of deep inside a commit."""

from __future__ import annotations

import inspect

from kafka.admin import KafkaAdminClient
from kafka.cluster import ClusterMetadata
from kafka.net.manager import KafkaConnectionManager
from kafka.protocol.admin.transactions import DescribeProducersRequest, ListTransactionsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer.transaction import EndTxnRequest, InitProducerIdRequest

from airflow_provider_kafka_eos.kafka.admin.describe import _prefix_pattern
from airflow_provider_kafka_eos.kafka.protocol.wire import error_name


def test_connection_manager_calls_exist():
    assert "request_timeout_ms" in inspect.signature(KafkaConnectionManager.send).parameters
    assert callable(KafkaConnectionManager.run)
    assert "synthesize_node_id" in inspect.signature(ClusterMetadata.add_coordinator).parameters
    assert hasattr(KafkaAdminClient, "_async_get_leader_for_partitions")
    # Wire.abort_transaction: the admin abort of a hanging partition (KIP-664), bounded by Wire._run
    assert hasattr(KafkaAdminClient, "_async_abort_transaction")
    assert callable(KafkaAdminClient.abort_transaction)
    assert {"bootstrap_timeout_ms", "max_in_flight_requests_per_connection"} <= set(
        KafkaAdminClient.DEFAULT_CONFIG
    )


def test_request_schemas_we_build():
    end = EndTxnRequest(transactional_id="t", producer_id=1, producer_epoch=2, committed=True, version=5)
    assert end.API_VERSION == 5 and EndTxnRequest.max_version >= 5
    init = InitProducerIdRequest(
        transactional_id="t", transaction_timeout_ms=1, producer_id=-1, producer_epoch=-1
    )
    assert init.API_VERSION is None  # negotiated per connection from ApiVersions
    FindCoordinatorRequest(key_type=1, coordinator_keys=["t"], min_version=4)
    ListTransactionsRequest(
        state_filters=[], producer_id_filters=[], duration_filter=1, transactional_id_pattern="x"
    )
    DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(name="t", partition_indexes=[0])])
    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
        partition_index=0, timestamp=-1, current_leader_epoch=-1
    )


def test_error_names_are_kafkas():
    assert error_name(51) == "CONCURRENT_TRANSACTIONS (51)"
    assert error_name(48) == "INVALID_TXN_STATE (48)"


def test_prefix_pattern_escapes_regex_metacharacters():
    import re

    pattern = re.compile(_prefix_pattern(["etl.orders-v2", "a+b"]))
    assert pattern.fullmatch("etl.orders-v2-0-1") and pattern.fullmatch("a+b-1-2")
    assert not pattern.fullmatch("etlXorders-v2-0-1") and not pattern.fullmatch("aab-1-2")
