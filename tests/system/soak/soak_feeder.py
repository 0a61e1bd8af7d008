"""The soak's upstream producer (``./run soak --input kafka|both``): the Kafka-input pipeline's input.

A thread writes small transactions to the input topic, as an upstream service does, for as long as
the soak runs: each of 3-12 records with keys ``i<txn>:<n>`` (one key, one record: the example
Kafka-to-Kafka job keeps keys, so the output names its input), about one in four aborted on
purpose. Every transaction's end goes into the history as an ``input`` event: ``committed``,
``aborted``, or ``unknown`` when a fault (a Kafka node killed or paused) left its outcome unknown
to the producer. The checker never trusts the outcome alone: it reads the input topic itself
(read_committed) and holds the history against it.

The producer is confluent-kafka's, with its own transactional id outside the pipelines' prefix
(``upstream-...``), so the cleanup DAG never mistakes it for an orphan of theirs. Every call is
bounded; a producer in a state it cannot leave is closed and a new one (same transactional id)
fences it, which ends its open transaction.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from soak_history import History

CALL_TIMEOUT_S = 30
ABORT_SHARE = 0.25


class Feeder:
    """Writes input transactions to ``topic`` until :meth:`stop` (a daemon thread)."""

    def __init__(self, config: dict[str, Any], topic: str, partitions: int, history: History, seed: int,
                 every_s: tuple[float, float] = (2.0, 5.0)) -> None:
        self.config, self.topic, self.partitions, self.history = config, topic, partitions, history
        self.random = random.Random(seed)  # its own draws: the driver's sequence stays the seed's
        self.every_s = every_s
        self.transactional_id = f"upstream-{topic}"
        self.written = {"committed": 0, "aborted": 0, "unknown": 0}  # plain: the summary takes it as is
        self._producer: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-feeder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 2 * CALL_TIMEOUT_S + 10) -> None:
        """Stop after the transaction in flight ends (each call is bounded, so this is too)."""
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError(f"the soak's input feeder did not stop within {timeout_s} s")
        self._close()

    def halt(self) -> None:
        """Stop for a teardown: ask, wait a bounded while, never raise (the test's own error matters)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2 * CALL_TIMEOUT_S + 10)

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            number += 1
            keys = [f"i{number:06d}:{n:02d}" for n in range(self.random.randint(3, 12))]
            abort = self.random.random() < ABORT_SHARE
            outcome, why = self._write(keys, abort)
            self.written[outcome] += 1
            extra = {"why": why} if why else {}
            self.history.record("input", txn=number, keys=keys, outcome=outcome, **extra)
            self._stop.wait(self.random.uniform(*self.every_s))

    def _write(self, keys: list[str], abort: bool) -> tuple[str, str | None]:
        """One transaction; its outcome as the producer knows it, and why when not as planned."""
        from confluent_kafka import KafkaException

        try:
            producer = self._ready()
            producer.begin_transaction()
            for n, key in enumerate(keys):
                producer.produce(self.topic, key=key.encode(), value=f"event {key}".encode(),
                                 partition=n % self.partitions)
            if abort:
                producer.abort_transaction(CALL_TIMEOUT_S)
                return "aborted", None
            producer.commit_transaction(CALL_TIMEOUT_S)
            return "committed", None
        except KafkaException as exc:
            error = exc.args[0]
            if self._producer is not None and error.txn_requires_abort():
                try:
                    self._producer.abort_transaction(CALL_TIMEOUT_S)
                    return "aborted", str(error)
                except KafkaException as again:
                    self._close()
                    return "unknown", f"{error}; abort: {again.args[0]}"
            self._close()  # the next transaction starts on a new producer, which fences this one
            return "unknown", str(error)

    def _ready(self) -> Any:
        if self._producer is None:
            from confluent_kafka import Producer

            producer = Producer({**self.config, "transactional.id": self.transactional_id,
                                 "transaction.timeout.ms": 60_000})
            producer.init_transactions(CALL_TIMEOUT_S)
            self._producer = producer
        return self._producer

    def _close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(0)

