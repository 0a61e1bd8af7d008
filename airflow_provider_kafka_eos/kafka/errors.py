"""The errors every part of the provider raises.

Each error answers the three questions an on-call engineer has when a task fails: *which
transaction*, *what went wrong*, and *what do I do now*. ``str(err)`` reads::

    <transactional id>: <cause>. Next step: kafka-eos-txn runbook <page> (<project URL>/.../<page>.md)

(the runbook ships with the package: the command prints the page wherever the provider is
installed, the URL opens it in a browser; see ``airflow_provider_kafka_eos/runbook.py``)

(without the id part when no single transaction is concerned). Airflow code re-raises these
unchanged, so this text is exactly what the user sees in the task log; keep causes short,
factual and free of secrets and tracebacks.
"""

from __future__ import annotations

from airflow_provider_kafka_eos import runbook as _runbook

__all__ = [
    "AuthenticationError",
    "AuthorizationError",
    "BrokerUnreachableError",
    "CheckpointConflictError",
    "ConfigError",
    "DataLossError",
    "InputBusyError",
    "InputCheckpointPendingError",
    "InputRangeLostError",
    "KafkaEosError",
    "ManifestError",
    "ManifestStoreError",
    "MissingExtraError",
    "PipelineBusyError",
    "PoisonRecordError",
    "PreflightError",
    "ProducerFencedError",
    "SchemaMismatchError",
    "SchemaRegistryError",
    "SecureConnectionError",
    "SecurityProtocolMismatchError",
    "SpeculativeExecutionError",
    "TlsCertificateError",
    "TransactionTimeoutRiskError",
    "UnknownTransactionError",
    "UnsupportedCapabilityError",
    "UsageError",
    "VerdictUnknownError",
]


class KafkaEosError(Exception):
    """Base class: a cause, optionally the transaction it concerns, and the runbook page to read.

    ``runbook`` is the page name without folder or extension (``"data-loss"``); each subclass
    has a default so call sites only override it when a more specific page helps.
    """

    default_runbook: str = "troubleshooting"

    def __init__(self, message: str, *, transactional_id: str | None = None, runbook: str | None = None):
        self.cause = message.rstrip().rstrip(".")
        self.transactional_id = transactional_id
        self.runbook = runbook or self.default_runbook
        super().__init__(str(self))

    @property
    def runbook_url(self) -> str:
        return _runbook.page_url(self.runbook)

    @property
    def next_step(self) -> str:
        """The runbook page, as a command and as a URL."""
        return _runbook.reference(self.runbook)

    def __str__(self) -> str:
        prefix = f"{self.transactional_id}: " if self.transactional_id else ""
        return f"{prefix}{self.cause}. Next step: {self.next_step}"

    def __reduce__(self):
        # Keep keyword-only arguments across pickling (Spark ships executor errors to the driver).
        return (_rebuild, (type(self), self.cause, self.transactional_id, self.runbook, self.__dict__))


def _rebuild(cls, cause, transactional_id, runbook, state):
    err = cls.__new__(cls)
    KafkaEosError.__init__(err, cause, transactional_id=transactional_id, runbook=runbook)
    err.__dict__.update(state)
    return err


class UsageError(KafkaEosError):
    """The request itself is wrong (missing or contradictory arguments); nothing was sent."""

    default_runbook = "resolve-manually"


class ConfigError(KafkaEosError):
    """A client configuration key is unknown, malformed or cannot be translated for a client library."""

    default_runbook = "configuration"


class MissingExtraError(KafkaEosError, ImportError):
    """A part of the provider needs a package of one of its extras, which this Python lacks.

    An ``ImportError`` too, so that code (and Airflow's DAG processor) treating a missing optional
    dependency as an import failure keeps doing so; the message names the extra to install.
    """

    default_runbook = "spark-job-requirements"


class BrokerUnreachableError(KafkaEosError):
    """No broker answered within the bounded connect/request timeout."""

    default_runbook = "broker-unreachable"


class AuthorizationError(KafkaEosError):
    """The principal lacks an ACL (the message names the operation and resource needed), or its
    credentials were refused."""

    default_runbook = "missing-acl"


class AuthenticationError(AuthorizationError):
    """The broker refused the credentials or the SASL mechanism (it answered; waiting will not help)."""

    default_runbook = "sasl-authentication"


class SecureConnectionError(KafkaEosError):
    """A TLS or security-protocol refusal named at the first failed handshake, not at the timeout."""

    default_runbook = "tls-certificate"


class TlsCertificateError(SecureConnectionError):
    """A certificate was refused: not trusted, expired, the wrong host name, or a client certificate."""

    default_runbook = "tls-certificate"


class SecurityProtocolMismatchError(SecureConnectionError):
    """Client and listener disagree on TLS or SASL (TLS to a plaintext port, SASL to a non-SASL one...)."""

    default_runbook = "security-protocol-mismatch"


class UnknownTransactionError(KafkaEosError):
    """The coordinator does not know the transactional id (never used, or expired)."""

    default_runbook = "unknown-transaction"


class ProducerFencedError(KafkaEosError):
    """The producer id / epoch given does not match the coordinator's: another producer owns the id."""

    default_runbook = "producer-fenced"


class DataLossError(KafkaEosError):
    """A prepared transaction was aborted (or timed out) and can no longer be committed.

    ``outcomes`` (when set) lists what was committed before the loss was detected.
    """

    default_runbook = "data-loss"

    def __init__(
        self,
        message: str,
        *,
        transactional_id: str | None = None,
        runbook: str | None = None,
        outcomes: list | None = None,
    ):
        self.outcomes = list(outcomes or [])
        super().__init__(message, transactional_id=transactional_id, runbook=runbook)


class TransactionTimeoutRiskError(KafkaEosError):
    """A prepared transaction is so close to its timeout that committing it is a race with the broker."""

    default_runbook = "transaction-timeout-risk"


class ManifestError(KafkaEosError):
    """A checkpoint manifest is missing, unreadable or fails validation (the message names uri and field)."""

    default_runbook = "malformed-manifest"


class ManifestStoreError(ManifestError):
    """The manifest store is not configured, does not exist or cannot be read or written (its
    endpoint does not answer, its credentials are refused): the message names the store's URI."""

    default_runbook = "manifest-store"


class InputBusyError(KafkaEosError):
    """Another run holds the input's claim, has not prepared it yet and may still be running."""

    default_runbook = "duplicate-input"


class PipelineBusyError(KafkaEosError):
    """Another run is writing the pipeline (it holds the writer lease): two writers at once would
    abort each other's prepared transactions, so this one waited, then wrote nothing."""

    default_runbook = "overlapping-runs"


class InputCheckpointPendingError(KafkaEosError):
    """An older checkpoint of the pipeline still holds the Kafka input: the new one would read it twice."""

    default_runbook = "input-offsets"


class InputRangeLostError(KafkaEosError):
    """Kafka no longer has (part of) an input range the pipeline has not read yet."""

    default_runbook = "lost-input-ranges"


class PreflightError(KafkaEosError):
    """A preflight check failed: the pipeline would not be exactly-once as configured."""

    default_runbook = "preflight"


class UnsupportedCapabilityError(KafkaEosError):
    """The cluster lacks an API or feature the requested operation needs."""

    default_runbook = "capabilities"


class SpeculativeExecutionError(KafkaEosError):
    """Spark speculative execution is on for the write stage (two attempts would share one transaction)."""

    default_runbook = "speculative-execution"


class CheckpointConflictError(KafkaEosError):
    """A run maps to a checkpoint another run prepared, and nothing shows they read the same input.

    Succeeding would silently drop this run's records, so the run fails and writes nothing.
    """

    default_runbook = "rerun-a-checkpoint"


class VerdictUnknownError(KafkaEosError):
    """Nobody can tell yet whether a prepared transaction was committed or aborted.

    The coordinator no longer holds the recorded producer id / epoch and does not recognise a
    retry of it, and the partitions' data cannot answer either (no first offsets recorded, the
    records deleted by retention, a partition unreadable). Acting on a guess could duplicate or
    lose the batch, so the caller refuses and changes nothing (``kafka/admin/verdict.py``).
    """

    default_runbook = "verdict-unknown"


class SchemaRegistryError(KafkaEosError):
    """The Schema Registry refused or could not answer a check made before any transaction opened:
    unreachable, credentials refused, a missing subject, or a schema its compatibility rule rejects.
    The message names the subject and the registry URL (never its credentials)."""

    default_runbook = "schema-registry"


class PoisonRecordError(SchemaRegistryError):
    """A Kafka-input record that cannot be decoded (not in the Confluent wire format, a schema id the
    registry does not know, bytes that do not decode under the schema), under the ``fail`` policy:
    the run fails naming topic, partition and offset, and nothing of the checkpoint is committed."""

    default_runbook = "poison-record"


class SchemaMismatchError(SchemaRegistryError):
    """The DataFrame's columns do not match the writer's schema (a missing or extra field, a wrong
    type, a null where the schema has none): nothing of the batch was written."""
