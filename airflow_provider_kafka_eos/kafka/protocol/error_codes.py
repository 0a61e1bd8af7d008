"""Kafka's error codes: the one table the provider reads them from, built on kafka-python's.

kafka-python (a dependency already) carries the protocol's whole table in ``kafka.errors``, one
class per code. Every module that acts on a code takes its name from here, so a number is never
written twice and a comment can never name the wrong code. The names are the protocol guide's
(``NOT_LEADER_OR_FOLLOWER``), which is what a person searches for; where kafka-python kept an
older name the class says which code is meant. The rules built on these codes (which are
retried, what a refusal becomes) stay with their owners: ``coordinator_answers`` for the
transaction coordinator, the producers for Produce / AddPartitionsToTxn.
"""

from __future__ import annotations

import kafka.errors as kerr

__all__ = [
    "CLUSTER_AUTHORIZATION_FAILED",
    "CONCURRENT_TRANSACTIONS",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "DUPLICATE_SEQUENCE_NUMBER",
    "FENCED_LEADER_EPOCH",
    "ILLEGAL_SASL_STATE",
    "INVALID_PRODUCER_EPOCH",
    "INVALID_PRODUCER_ID_MAPPING",
    "INVALID_TRANSACTION_TIMEOUT",
    "INVALID_TXN_STATE",
    "KAFKA_STORAGE_ERROR",
    "LEADER_NOT_AVAILABLE",
    "NETWORK_EXCEPTION",
    "NONE",
    "NOT_COORDINATOR",
    "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "NOT_LEADER_OR_FOLLOWER",
    "OFFSET_OUT_OF_RANGE",
    "OPERATION_NOT_ATTEMPTED",
    "PRODUCER_FENCED",
    "REQUEST_TIMED_OUT",
    "SECURITY_DISABLED",
    "TOPIC_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_NOT_FOUND",
    "TRANSACTION_COORDINATOR_FENCED",
    "UNKNOWN_LEADER_EPOCH",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "UNSUPPORTED_SASL_MECHANISM",
    "UNSUPPORTED_VERSION",
    "error_name",
]

NONE: int = kerr.NoError.errno
UNKNOWN_TOPIC_OR_PARTITION: int = kerr.UnknownTopicOrPartitionError.errno
OFFSET_OUT_OF_RANGE: int = kerr.OffsetOutOfRangeError.errno
LEADER_NOT_AVAILABLE: int = kerr.LeaderNotAvailableError.errno
NOT_LEADER_OR_FOLLOWER: int = kerr.NotLeaderForPartitionError.errno
REQUEST_TIMED_OUT: int = kerr.RequestTimedOutError.errno
NETWORK_EXCEPTION: int = kerr.NetworkExceptionError.errno
COORDINATOR_LOAD_IN_PROGRESS: int = kerr.CoordinatorLoadInProgressError.errno
COORDINATOR_NOT_AVAILABLE: int = kerr.CoordinatorNotAvailableError.errno
NOT_COORDINATOR: int = kerr.NotCoordinatorError.errno
NOT_ENOUGH_REPLICAS: int = kerr.NotEnoughReplicasError.errno
NOT_ENOUGH_REPLICAS_AFTER_APPEND: int = kerr.NotEnoughReplicasAfterAppendError.errno
TOPIC_AUTHORIZATION_FAILED: int = kerr.TopicAuthorizationFailedError.errno
CLUSTER_AUTHORIZATION_FAILED: int = kerr.ClusterAuthorizationFailedError.errno
UNSUPPORTED_SASL_MECHANISM: int = kerr.UnsupportedSaslMechanismError.errno
ILLEGAL_SASL_STATE: int = kerr.IllegalSaslStateError.errno
UNSUPPORTED_VERSION: int = kerr.UnsupportedVersionError.errno
DUPLICATE_SEQUENCE_NUMBER: int = kerr.DuplicateSequenceNumberError.errno
INVALID_PRODUCER_EPOCH: int = kerr.InvalidProducerEpochError.errno
INVALID_TXN_STATE: int = kerr.InvalidTxnStateError.errno
INVALID_PRODUCER_ID_MAPPING: int = kerr.InvalidProducerIdMappingError.errno
INVALID_TRANSACTION_TIMEOUT: int = kerr.InvalidTransactionTimeoutError.errno
CONCURRENT_TRANSACTIONS: int = kerr.ConcurrentTransactionsError.errno
TRANSACTION_COORDINATOR_FENCED: int = kerr.TransactionCoordinatorFencedError.errno
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: int = kerr.TransactionalIdAuthorizationFailedError.errno
OPERATION_NOT_ATTEMPTED: int = kerr.OperationNotAttemptedError.errno
SECURITY_DISABLED: int = kerr.SecurityDisabledError.errno
KAFKA_STORAGE_ERROR: int = kerr.KafkaStorageError.errno
FENCED_LEADER_EPOCH: int = kerr.FencedLeaderEpochError.errno
UNKNOWN_LEADER_EPOCH: int = kerr.UnknownLeaderEpochError.errno
PRODUCER_FENCED: int = kerr.ProducerFencedError.errno
TRANSACTIONAL_ID_NOT_FOUND: int = kerr.TransactionalIdNotFoundError.errno


def error_name(code: int) -> str:
    """Kafka's name for an error code (``CONCURRENT_TRANSACTIONS``), for messages users can search."""
    cls = kerr.for_code(code)
    return f"{getattr(cls, 'message', cls.__name__)} ({code})"
