"""Transaction admin APIs of the embedded broker (KIP-664, KIP-994, KIP-1152).

ListTransactions, DescribeTransactions, DescribeProducers and WriteTxnMarkers, answered the way
``KafkaApis`` + ``TransactionStateManager.listTransactionStates`` answer them, so that
kafka-python's admin client (and the project's ``TransactionAdmin``) see what the Java admin
would see on a real cluster.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from kafka_eos_testing.broker.api import RequestContext, handles
from kafka_eos_testing.broker.coordinator import CLUSTER_NAME, coordinator_for
from kafka_eos_testing.broker.txn_state import Err, TxnMetadata, TxnState


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def list_transactions(
    transactions: list[TxnMetadata],
    *,
    now_ms: int,
    state_filters: list[str] = (),  # type: ignore[assignment]
    producer_id_filters: list[int] = (),  # type: ignore[assignment]
    duration_filter_ms: int = -1,
    transactional_id_pattern: str | None = None,
) -> tuple[Err, list[str], list[TxnMetadata]]:
    """The filters of ``listTransactionStates``: (error, unknown state names, matching transactions).

    A state filter that names no state is reported back and matches nothing (Kafka's behaviour);
    the pattern is matched against the whole id (Java ``Matcher.matches``); Dead is never listed.
    """
    wanted_states: set[TxnState] = set()
    unknown: list[str] = []
    for name in state_filters:
        state = TxnState.from_wire_name(name)
        if state is None:
            unknown.append(name)
        else:
            wanted_states.add(state)
    pattern = None
    if transactional_id_pattern:
        try:
            pattern = _compile(transactional_id_pattern)
        except re.error:
            return Err.INVALID_REGULAR_EXPRESSION, unknown, []
    pids = set(producer_id_filters)
    result = []
    for txn in transactions:
        if txn.state is TxnState.DEAD:
            continue
        if pids and txn.producer_id not in pids:
            continue
        if state_filters and txn.state not in wanted_states:
            continue
        if duration_filter_ms >= 0 and now_ms - txn.start_ms <= duration_filter_ms:
            continue
        if pattern is not None and pattern.fullmatch(txn.transactional_id) is None:
            continue
        result.append(txn)
    return Err.NONE, unknown, result


@handles(ListTransactionsRequest, ListTransactionsResponse, max_version=2)
def handle_list_transactions(ctx: RequestContext, req: ListTransactionsRequest) -> ListTransactionsResponse:
    coordinator = coordinator_for(ctx.broker)
    version = ctx.api_version
    err, unknown, matching = list_transactions(
        coordinator.transactions(),
        now_ms=coordinator.now_ms(),
        state_filters=list(req.state_filters or ()),
        producer_id_filters=list(req.producer_id_filters or ()),
        duration_filter_ms=req.duration_filter if version >= 1 else -1,
        transactional_id_pattern=req.transactional_id_pattern if version >= 2 else None,
    )
    state_cls = ListTransactionsResponse.TransactionState
    return ListTransactionsResponse(
        throttle_time_ms=0,
        error_code=err,
        unknown_state_filters=unknown,
        transaction_states=[
            state_cls(
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                transaction_state=txn.state.wire_name,
            )
            for txn in matching
            if ctx.authorized("DESCRIBE", "TRANSACTIONAL_ID", txn.transactional_id)
        ],
    )


def _topics_of(txn: TxnMetadata, topic_cls: Any) -> list:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(txn.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [topic_cls(topic=topic, partitions=parts) for topic, parts in by_topic.items()]


@handles(DescribeTransactionsRequest, DescribeTransactionsResponse, max_version=0)
def handle_describe_transactions(
    ctx: RequestContext, req: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    coordinator = coordinator_for(ctx.broker)
    state_cls = DescribeTransactionsResponse.TransactionState
    topic_cls = state_cls.TopicData

    def failed(transactional_id: str, code: Err) -> Any:
        return state_cls(
            error_code=code,
            transactional_id=transactional_id,
            transaction_state="",
            transaction_timeout_ms=0,
            transaction_start_time_ms=-1,
            producer_id=-1,
            producer_epoch=-1,
            topics=[],
        )

    states = []
    for transactional_id in req.transactional_ids:
        if not ctx.authorized("DESCRIBE", "TRANSACTIONAL_ID", transactional_id):
            states.append(failed(transactional_id, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        txn = coordinator.get(transactional_id)
        if txn is None or txn.state is TxnState.DEAD:
            states.append(failed(transactional_id, Err.TRANSACTIONAL_ID_NOT_FOUND))
            continue
        states.append(
            state_cls(
                error_code=0,
                transactional_id=transactional_id,
                transaction_state=txn.state.wire_name,
                transaction_timeout_ms=txn.timeout_ms,
                transaction_start_time_ms=txn.start_ms,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                topics=_topics_of(txn, topic_cls),
            )
        )
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


@handles(DescribeProducersRequest, DescribeProducersResponse, max_version=0)
def handle_describe_producers(
    ctx: RequestContext, req: DescribeProducersRequest
) -> DescribeProducersResponse:
    topic_cls = DescribeProducersResponse.TopicResponse
    partition_cls = topic_cls.PartitionResponse
    producer_cls = partition_cls.ProducerState
    topics = getattr(ctx.broker, "topics", None)
    out = []
    for topic in req.topics:
        allowed = ctx.authorized("READ", "TOPIC", topic.name)
        partitions = []
        for index in topic.partition_indexes:
            partition_log = topics.get(topic.name, index) if (allowed and topics is not None) else None
            if not allowed or partition_log is None:
                code = Err.TOPIC_AUTHORIZATION_FAILED if not allowed else Err.UNKNOWN_TOPIC_OR_PARTITION
                partitions.append(
                    partition_cls(
                        partition_index=index, error_code=code, error_message=None, active_producers=[]
                    )
                )
                continue
            partitions.append(
                partition_cls(
                    partition_index=index,
                    error_code=0,
                    error_message=None,
                    active_producers=[
                        producer_cls(
                            producer_id=state.producer_id,
                            producer_epoch=state.producer_epoch,
                            last_sequence=state.last_sequence,
                            last_timestamp=state.last_timestamp,
                            coordinator_epoch=state.coordinator_epoch,
                            current_txn_start_offset=(
                                -1
                                if state.current_txn_start_offset is None
                                else state.current_txn_start_offset
                            ),
                        )
                        for state in partition_log.producer_states()
                    ],
                )
            )
        out.append(topic_cls(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=out)


@handles(WriteTxnMarkersRequest, WriteTxnMarkersResponse, min_version=1, max_version=2)
def handle_write_txn_markers(ctx: RequestContext, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    result_cls = WriteTxnMarkersResponse.WritableTxnMarkerResult
    topic_cls = result_cls.WritableTxnMarkerTopicResult
    partition_cls = topic_cls.WritableTxnMarkerPartitionResult
    # KIP-664: ALTER on the cluster (3.8+) or the inter-broker CLUSTER_ACTION.
    allowed = ctx.authorized("ALTER", "CLUSTER", CLUSTER_NAME) or ctx.authorized(
        "CLUSTER_ACTION", "CLUSTER", CLUSTER_NAME
    )
    coordinator = coordinator_for(ctx.broker)
    results = []
    for marker in req.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                if not allowed:
                    code = Err.CLUSTER_AUTHORIZATION_FAILED
                else:
                    code = coordinator.write_markers(
                        marker.producer_id,
                        marker.producer_epoch,
                        bool(marker.transaction_result),
                        marker.coordinator_epoch,
                        topic.name,
                        index,
                    )
                partitions.append(partition_cls(partition_index=index, error_code=int(code)))
            topics.append(topic_cls(name=topic.name, partitions=partitions))
        results.append(result_cls(producer_id=marker.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=results)
