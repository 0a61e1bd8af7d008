"""Prepare one partition's Kafka transaction: the pre-commit half of the two-phase commit.

A Spark task opens a transactional confluent-kafka producer, writes its rows, flushes, and
then *leaves the transaction open*: a later Airflow task commits it by resuming the
producer id and epoch recorded in the :class:`Committable` this module returns.

Two facts shape the code:

* ``init_transactions()`` fences every earlier holder of the same transactional id (a
  retried or zombie task attempt): the coordinator bumps the epoch and aborts whatever that
  attempt left open. So a retry never duplicates data, and the committable must carry the
  producer id/epoch of *this* attempt, which librdkafka only exposes in its statistics JSON
  (``eos.producer_id`` / ``eos.producer_epoch``).
* confluent-kafka 2.16's ``Producer.close()`` aborts an open transaction. A prepared producer
  is therefore released by dropping the last reference (``rd_kafka_destroy``), never closed.
  ``tests/kafka/producers/test_librdkafka.py`` (``test_released_producer_leaves_the_transaction_open...``)
  proves the transaction survives that, so a client release that aborts on destroy is caught.

No Airflow imports: this runs inside Spark executors.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Protocol

from airflow_provider_kafka_eos.kafka.config import is_secret_key
from airflow_provider_kafka_eos.kafka.errors import (
    BrokerUnreachableError,
    KafkaEosError,
    ProducerFencedError,
)
from airflow_provider_kafka_eos.kafka.producers.producer_config import LIBRDKAFKA, check_producer_settings
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition
from airflow_provider_kafka_eos.kafka.protocol.connection_security import (
    check_client_files,
    init_transactions_watched,
)


class VersionedAdmin(Protocol):
    """What the transaction protocol is read from (a TransactionAdmin): the cluster's finalized
    transaction version and the EndTxn version it allows."""

    def transaction_version(self) -> int: ...

    def end_txn_version(self) -> int: ...

__all__ = [
    "DEFAULT_PARTITIONER",
    "PartitionTransaction",
    "TransactionProtocol",
    "producer_settings",
    "verified_committable",
]

log = logging.getLogger(__name__)

# Statistics are the only place librdkafka reports the producer id/epoch it holds. A short
# interval keeps the wait after init_transactions() small; the JSON is tiny for one topic.
STATISTICS_INTERVAL_MS = 100
# Rows without a partition column are placed the way the Java client places them: murmur2 of the
# key bytes, toPositive(hash) % partitions (kafka/producers/partitioner.py is the same rule for the Arrow
# producer). librdkafka's own default, consistent_random, hashes with CRC32 and puts the same key
# in a different partition than a Java or Kafka Streams producer, which breaks co-partitioned
# joins and compacted topics shared with JVM producers. Null keys: librdkafka keeps a random
# partition for ``sticky.partitioning.linger.ms`` (its default, 10 ms) and then picks another; Java's
# built-in partitioner keeps one per batch: both sticky, the same spread over time. A connection
# that sets ``partitioner`` itself keeps its choice.
DEFAULT_PARTITIONER = "murmur2_random"
# How many produce() calls between poll(0) calls that serve delivery reports.
_POLL_EVERY = 5_000


@dataclass(frozen=True)
class TransactionProtocol:
    """Which commit protocol the cluster speaks; recorded in every committable.

    Determined once on the driver (``ClusterCapabilities``) and shipped to the tasks, so a
    Spark task does not send its own ApiVersions round trip.
    """

    transaction_version: int  # 1 or 2 (finalized transaction.version; 0 on old clusters counts as 1)
    end_txn_version: int

    @classmethod
    def from_admin(cls, admin: VersionedAdmin) -> TransactionProtocol:
        """Ask the cluster through a ``TransactionAdmin`` (finalized feature + EndTxn versions)."""
        return cls(transaction_version=2 if admin.transaction_version() >= 2 else 1,
                   end_txn_version=admin.end_txn_version())


def producer_settings(
    confluent_config: Mapping[str, Any], transactional_id: str, transaction_timeout_ms: int
) -> dict[str, Any]:
    """The confluent-kafka config of a prepare-and-leave-open producer.

    The user's connection config comes first; a setting that would break the guarantee
    (``enable.idempotence=false``, ``acks=1``) or that the writer owns (``transactional.id``) is
    refused by name (``kafka/producers/producer_config.py``), never silently overridden.
    """
    check_producer_settings(confluent_config, LIBRDKAFKA)
    settings = dict(confluent_config)
    settings.update(
        {
            "transactional.id": transactional_id,
            "transaction.timeout.ms": int(transaction_timeout_ms),
            "enable.idempotence": True,
            "acks": "all",
            "statistics.interval.ms": STATISTICS_INTERVAL_MS,
        }
    )
    settings.setdefault("partitioner", DEFAULT_PARTITIONER)
    settings.setdefault("linger.ms", 20)
    settings.setdefault("compression.type", "none")
    return settings


class PartitionTransaction:
    """One Spark partition's transaction: begin, write Arrow batches, flush, verify, hand over.

    ``describe`` is ``TransactionAdmin.describe`` (or anything with its signature): the
    verification asks the coordinator, not the client, whether the transaction is really
    open under this producer's id and epoch.
    """

    def __init__(
        self,
        *,
        confluent_config: Mapping[str, Any],
        transactional_id: str,
        topic: str,
        transaction_timeout_ms: int,
        protocol: TransactionProtocol,
        describe: Callable[[list[str]], Mapping[str, Any]],
        init_timeout_s: float = 60.0,
        producer_factory: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.transactional_id = transactional_id
        self.topic = topic
        self.transaction_timeout_ms = int(transaction_timeout_ms)
        self.protocol = protocol
        self._describe = describe
        self._init_timeout_s = init_timeout_s
        self._stats: dict[str, Any] = {}
        self._delivery_errors: list[str] = []
        self._fatal_error: str | None = None
        self._connection_errors: list[tuple[int, str]] = []  # for connection_security (TLS / SASL)
        self._partitions: set[int] = set()
        self._first_offsets: dict[int, int] = {}  # partition -> offset of our first delivered record
        self._produced = 0
        self._since_poll = 0
        self.producer_id = -1
        self.producer_epoch = -1
        settings = producer_settings(confluent_config, transactional_id, transaction_timeout_ms)
        # What connection_security needs to name a refused handshake (no secret kept here).
        self._connection = {
            k: v
            for k, v in settings.items()
            if not callable(v) and (not is_secret_key(k) or k == "sasl.oauthbearer.token.endpoint.url")
        }
        settings["stats_cb"] = self._on_stats
        settings["error_cb"] = self._on_error
        if producer_factory is None:
            from confluent_kafka import Producer

            producer_factory = Producer
        check_client_files(settings)  # a missing file or a wrong key password, named first
        self._producer: Any = producer_factory(settings)

    # -- librdkafka callbacks ----------------------------------------------------------------

    def _on_stats(self, stats_json: str) -> None:
        try:
            self._stats = json.loads(stats_json)
        except ValueError:  # a malformed statistics blob must not kill the task
            return

    def _on_error(self, err: Any) -> None:
        # A fatal error (fenced by a newer attempt) can make confluent-kafka's flush() fail with
        # a bare SystemError that names no cause; keep it, so the error raised names the real one.
        if err.fatal():
            self._fatal_error = str(err)
        if len(self._connection_errors) < 20:
            self._connection_errors.append((err.code(), err.str()))

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            if len(self._delivery_errors) < 5:
                self._delivery_errors.append(str(err))
            else:
                self._delivery_errors[-1] = f"{err} (and more)"
        else:
            partition, offset = msg.partition(), msg.offset()
            self._partitions.add(partition)
            if offset is not None and offset >= 0 and offset < self._first_offsets.get(partition, offset + 1):
                self._first_offsets[partition] = offset

    # -- the transaction ---------------------------------------------------------------------

    def begin(self) -> None:
        """Fence earlier attempts of this id and open the transaction.

        The producer id/epoch this fencing obtained are read from librdkafka's statistics
        later (:meth:`identity`), so producing does not wait for a statistics interval.
        """
        producer = self._require_producer()
        try:
            init_transactions_watched(
                producer, self._init_timeout_s, self._connection_errors, self._connection, self.topic
            )
        except Exception as exc:
            error = (
                exc.with_traceback(None)  # its traceback would keep the producer alive
                if isinstance(exc, KafkaEosError)
                else translate_error(exc, self.transactional_id, "init_transactions")
            )
            # A producer that could not initialise holds no transaction; drop it (and this
            # frame's reference, which the traceback would keep) so it stops dialling the brokers.
            del producer
            self.release()
            raise error from None
        producer.begin_transaction()

    def identity(self) -> tuple[int, int]:
        """The producer id and epoch this producer holds (from the statistics JSON)."""
        if self.producer_id < 0:
            self.producer_id, self.producer_epoch = self._wait_for_producer_identity()
            log.info("%s: transaction open under producer id %d, epoch %d",
                     self.transactional_id, self.producer_id, self.producer_epoch)
        return self.producer_id, self.producer_epoch

    def write_rows(
        self,
        keys: Iterable[Any],
        values: Iterable[Any],
        headers: Iterable[Any] | None = None,
        partitions: Iterable[Any] | None = None,
        timestamps: Iterable[Any] | None = None,
    ) -> int:
        """Produce one batch of rows (parallel sequences); returns how many were produced.

        ``timestamps``: CreateTime per row in epoch milliseconds (None: librdkafka stamps it)."""
        try:
            count = self._produce_rows(keys, values, headers, partitions, timestamps)
        except KafkaEosError:
            raise
        except Exception as exc:  # a fatal producer error (fenced, authorization) surfaces here
            raise translate_error(exc, self.transactional_id, "produce") from None
        self._produced += count
        return count

    def _produce_rows(
        self,
        keys: Iterable[Any],
        values: Iterable[Any],
        headers: Iterable[Any] | None,
        partitions: Iterable[Any] | None,
        timestamps: Iterable[Any] | None = None,
    ) -> int:
        producer = self._require_producer()
        produce = producer.produce
        topic = self.topic
        callback = self._on_delivery
        count = 0
        if headers is None and partitions is None and timestamps is None:
            for key, value in zip(keys, values, strict=True):
                try:
                    produce(topic, value, key, on_delivery=callback)
                except BufferError:
                    self._wait_for_room(lambda k=key, v=value: produce(topic, v, k, on_delivery=callback))
                count += 1
                self._since_poll += 1
                if self._since_poll >= _POLL_EVERY:
                    producer.poll(0)
                    self._since_poll = 0
        else:
            rows = zip(
                keys,
                values,
                headers if headers is not None else repeat(None),
                partitions if partitions is not None else repeat(None),
                timestamps if timestamps is not None else repeat(None),
                strict=False,  # repeat() is endless; keys/values bound the rows
            )
            for key, value, row_headers, partition, stamp in rows:
                kwargs: dict[str, Any] = {"on_delivery": callback}
                if row_headers:
                    kwargs["headers"] = _normalise_headers(row_headers)
                if partition is not None:
                    kwargs["partition"] = int(partition)
                if stamp is not None:
                    kwargs["timestamp"] = int(stamp)
                try:
                    produce(topic, value, key, **kwargs)
                except BufferError:
                    self._wait_for_room(lambda k=key, v=value, kw=kwargs: produce(topic, v, k, **kw))
                count += 1
                self._since_poll += 1
                if self._since_poll >= _POLL_EVERY:
                    producer.poll(0)
                    self._since_poll = 0
        return count

    def flush(self, timeout_s: float = 120.0) -> None:
        """Wait for every produced record to be acknowledged; raise on any delivery failure."""
        try:
            # No local name for the producer: a raised error's traceback keeps this frame, and
            # must not keep a fenced producer alive (and dialling the brokers) with it.
            remaining = self._require_producer().flush(timeout_s)
        except Exception as exc:  # KafkaException, or SystemError wrapping one raised in a callback
            known = self._fatal_error or "; ".join(self._delivery_errors) or None
            raise translate_error(exc, self.transactional_id, "flush", known_cause=known) from None
        if remaining:
            raise BrokerUnreachableError(
                f"{remaining} record(s) were not acknowledged within {timeout_s:.0f}s of flush",
                transactional_id=self.transactional_id,
                runbook="broker-unreachable",
            )
        if self._delivery_errors:
            cause = "; ".join(self._delivery_errors)
            if _names_fencing(cause):
                raise ProducerFencedError(
                    f"records were rejected because a newer attempt owns this transactional id ({cause})",
                    transactional_id=self.transactional_id,
                    runbook="speculative-execution",
                )
            raise KafkaEosError(f"records were not delivered ({cause})",
                                transactional_id=self.transactional_id, runbook="troubleshooting")

    def prepare(self) -> Committable | None:
        """Flush, verify on the coordinator, release the producer; ``None`` for an empty partition.

        Invariant 5: an empty transaction yields no committable (EndTxn on a resumed empty
        transaction fails on Kafka). The coordinator never saw a partition for it, so there is
        nothing to abort either.
        """
        try:
            self.flush()
            if self._produced == 0:
                return None
            self.identity()
            return self._verify()
        finally:
            # Prepared, empty or failed (fenced by a newer attempt, undeliverable): this
            # producer's work is over either way; dropping it never aborts the transaction.
            self.release()

    def release(self) -> None:
        """Drop the producer without ``close()`` (close() would abort the prepared transaction)."""
        self._producer = None

    # -- internals ---------------------------------------------------------------------------

    def _verify(self) -> Committable:
        return verified_committable(
            describe=self._describe,
            transactional_id=self.transactional_id,
            topic=self.topic,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            written_partitions=self._partitions,
            record_count=self._produced,
            protocol=self.protocol,
            first_offsets=self._first_offsets,
        )

    def _wait_for_producer_identity(self) -> tuple[int, int]:
        """Poll until librdkafka's statistics report the id/epoch init_transactions obtained."""
        producer = self._require_producer()
        deadline = time.monotonic() + max(5.0, 50 * STATISTICS_INTERVAL_MS / 1000)
        while True:
            # Statistics emitted after init_transactions() (state Assigned) carry our id/epoch;
            # any received while producing and flushing will do.
            eos = self._stats.get("eos") or {}
            pid = int(eos.get("producer_id", -1))
            if pid >= 0 and eos.get("idemp_state") == "Assigned":
                return pid, int(eos.get("producer_epoch", -1))
            if time.monotonic() >= deadline:
                break
            producer.poll(STATISTICS_INTERVAL_MS / 1000)
        raise KafkaEosError(
            "librdkafka did not report a producer id/epoch in its statistics after init_transactions",
            transactional_id=self.transactional_id,
            runbook="troubleshooting",
        )

    def _wait_for_room(self, retry: Callable[[], None]) -> None:
        producer = self._require_producer()
        while True:
            producer.poll(0.05)
            try:
                retry()
                return
            except BufferError:
                continue

    def _require_producer(self) -> Any:
        if self._producer is None:
            raise KafkaEosError("the producer was already released", transactional_id=self.transactional_id,
                                runbook="troubleshooting")
        return self._producer


def verified_committable(
    *,
    describe: Callable[[list[str]], Mapping[str, Any]],
    transactional_id: str,
    topic: str,
    producer_id: int,
    producer_epoch: int,
    written_partitions: Iterable[int],
    record_count: int,
    protocol: TransactionProtocol,
    two_phase: bool = False,
    first_offsets: Mapping[int, int] | None = None,
) -> Committable:
    """The coordinator must show our transaction Ongoing, with our id/epoch, on our partitions.

    Shared by both producers (librdkafka and Arrow), so "prepared" means the same on each path.
    ``first_offsets`` (partition -> offset of the first record this task wrote there, from its
    acknowledgements) is recorded in the committable: the data a later verdict reads.
    """
    try:
        description = describe([transactional_id])[transactional_id]
    except KafkaEosError:
        raise
    except Exception as exc:
        raise translate_error(exc, transactional_id, "DescribeTransactions") from None
    raw_state = description_field(description, "state")
    state = str(getattr(raw_state, "value", raw_state))
    pid = int(description_field(description, "producer_id"))
    epoch = int(description_field(description, "producer_epoch"))
    if state.lower() != "ongoing" or pid != producer_id or epoch != producer_epoch:
        raise ProducerFencedError(
            f"after flush the coordinator shows state {state} with producer id {pid} epoch {epoch}, "
            f"but this task holds producer id {producer_id} epoch {producer_epoch}: another "
            "attempt took over the transactional id or the transaction was aborted",
            transactional_id=transactional_id,
            runbook="speculative-execution",
        )
    coordinator_partitions = {
        (tp.topic, tp.partition) if isinstance(tp, TopicPartition) else (tp[0], tp[1])
        for tp in description_field(description, "partitions")
    }
    written = {(topic, p) for p in written_partitions}
    missing = written - coordinator_partitions
    if missing:
        raise ProducerFencedError(
            f"the coordinator's transaction does not cover partition(s) "
            f"{', '.join(f'{t}-{p}' for t, p in sorted(missing))} that this task wrote",
            transactional_id=transactional_id,
            runbook="speculative-execution",
        )
    return Committable(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partitions=tuple(TopicPartition(t, p) for t, p in sorted(written)),
        record_count=record_count,
        prepared_at_ms=int(time.time() * 1000),
        transaction_start_ms=int(description_field(description, "start_time_ms")),
        transaction_timeout_ms=int(description_field(description, "timeout_ms")),
        transaction_version=protocol.transaction_version,
        end_txn_version=protocol.end_txn_version,
        two_phase=two_phase,
        first_offsets=tuple(
            (TopicPartition(topic, p), offset) for p, offset in sorted((first_offsets or {}).items())
            if (topic, p) in written
        ),
    )


def _normalise_headers(row_headers: Any) -> list[tuple[str, bytes | None]]:
    """Arrow gives headers as a list of {key, value} structs or (key, value) map items."""
    items = row_headers.items() if isinstance(row_headers, Mapping) else row_headers
    result = []
    for item in items:
        if isinstance(item, Mapping):
            key, value = item.get("key"), item.get("value")
        else:
            key, value = item
        result.append((str(key), value))
    return result


def description_field(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, Mapping) else getattr(obj, name)


def _names_fencing(text: str) -> bool:
    """librdkafka's words for "a newer producer owns this id" (_FENCED, INVALID_PRODUCER_EPOCH)."""
    upper = text.upper()
    return "FENCED" in upper or "EPOCH" in upper


def translate_error(
    exc: Exception, transactional_id: str, step: str, known_cause: str | None = None
) -> KafkaEosError:
    """confluent-kafka's KafkaException -> our error classes (cause text, runbook page).

    A SystemError wraps an exception raised in a callback (its ``__context__``), or is bare
    ("returned NULL without setting an exception", seen when a fenced producer flushes): then
    ``known_cause``, what the producer recorded itself (its fatal error, rejected deliveries),
    names the cause.
    """
    if isinstance(exc, SystemError):
        text = str(exc.__context__) if exc.__context__ is not None else (known_cause or str(exc))
    else:
        text = str(exc)
    upper = text.upper()
    if "AUTHORIZ" in upper:
        from airflow_provider_kafka_eos.kafka.errors import AuthorizationError

        return AuthorizationError(f"{step} was refused: WRITE on TransactionalId (and the topic) is needed "
                                  f"({text})", transactional_id=transactional_id)
    if _names_fencing(text):
        return ProducerFencedError(f"{step}: a newer producer owns this transactional id ({text})",
                                   transactional_id=transactional_id, runbook="speculative-execution")
    if "TIMED OUT" in upper or "TIMEOUT" in upper or "TRANSPORT" in upper:
        return BrokerUnreachableError(f"{step} did not complete: the transaction coordinator did not answer "
                                      f"({text})", transactional_id=transactional_id)
    return KafkaEosError(f"{step} failed ({text})", transactional_id=transactional_id,
                         runbook="troubleshooting")
