"""Lanes: extra connections to the same brokers, for request streams Kafka serialises per connection.

Kafka's network layer handles one request per connection at a time: after reading a request
it mutes the channel until the response has been sent. An EndTxn (or a fencing InitProducerId)
is answered only once its record in ``__transaction_state`` is replicated (``acks=all``,
``min.insync.replicas``), so thousands of them pipelined on one connection commit one
transaction per replicated write round trip, however many are in flight. A *lane* is one more
:class:`~airflow_provider_kafka_eos.kafka.protocol.wire.Wire` (its own kafka-python connection pool and
IO thread, so its own connection to every node); a large per-coordinator group is split over
several lanes, each sent by its own thread, and the coordinator works on that many requests at
once (its appends are replicated together). The embedded broker handles pipelined requests
concurrently, so there lanes buy little; they are opened only for groups big enough to gain.

This module owns the *how many* and *which share* (:func:`lane_counts`, :func:`split`) and the
extra connections' lifetime (:class:`Lanes`); what is sent on a lane, and how its answers are
retried, stays with the caller (``TransactionAdmin``), unchanged.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from airflow_provider_kafka_eos.kafka.errors import KafkaEosError, UsageError
from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

__all__ = [
    "AUTO_MAX_LANES",
    "AUTO_MIN_GROUP",
    "MAX_LANES",
    "MIN_PER_LANE",
    "Lanes",
    "auto_lanes",
    "check_lanes",
    "lane_counts",
    "split",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_LANES = 64
# A lane costs a bootstrap (ApiVersions + Metadata) and a connection per node it talks to: only
# worth it when it carries at least this many requests (the floor of an explicit ``lanes=N``).
MIN_PER_LANE = 64
# With no setting the work chooses: a coordinator's group of n requests gets ceil(sqrt(n)) lanes,
# from AUTO_MIN_GROUP requests up, at most AUTO_MAX_LANES. Why a square root: with L lanes a group
# costs about a*L (opening lanes, spreading the work) + b*n/L (the requests each connection
# serialises), least at L = sqrt(n*b/a); three sweeps on a 3-node Kafka 4.4 cluster put b/a near 1
# (100, 1,000 and 10,000 transactions were fastest with 4-8, 16-32 and 32-64 lanes:
# docs/benchmarks.md, "Lanes chosen from the work").
AUTO_MIN_GROUP = 16
AUTO_MAX_LANES = 32


def check_lanes(lanes: object) -> int:
    """``lanes`` as a validated int (1..MAX_LANES), or UsageError naming the bad value."""
    if isinstance(lanes, bool) or not isinstance(lanes, int) or not 1 <= lanes <= MAX_LANES:
        raise UsageError(
            f"lanes must be a whole number from 1 to {MAX_LANES} (connections per transaction "
            f"coordinator), got {lanes!r}"
        )
    return lanes


def lane_counts(sizes: Sequence[int], *, lanes: int | None) -> list[int]:
    """How many lanes each group (of ``sizes[i]`` requests, one group per coordinator) gets.

    ``lanes=None`` (the default everywhere): chosen from the work, ``ceil(sqrt(n))`` lanes for a
    group of n from :data:`AUTO_MIN_GROUP` up, at most :data:`AUTO_MAX_LANES`; a cluster commits
    more EndTxn per replicated append of its transaction log the more are in flight, so a big batch
    wants many lanes, while a small one would spend more on opening connections than it gains.
    ``lanes=N`` (a user's setting): one per :data:`MIN_PER_LANE` requests, at most N. Always at
    least one.
    """
    if lanes is None:
        return [auto_lanes(size) for size in sizes]
    return [max(1, min(lanes, size // MIN_PER_LANE)) for size in sizes]


def auto_lanes(size: int) -> int:
    """Lanes for a group of ``size`` requests with no setting: ``ceil(sqrt(size))`` (see above)."""
    if size < AUTO_MIN_GROUP:
        return 1
    return min(AUTO_MAX_LANES, math.isqrt(size - 1) + 1)


def split(items: Sequence[T], count: int) -> list[list[T]]:
    """``items`` dealt round-robin into ``count`` non-empty shares (fewer when there are fewer items)."""
    count = max(1, min(count, len(items)))
    return [list(items[i::count]) for i in range(count)]


class Lanes:
    """The primary Wire plus extra ones opened on demand; closes the extra ones.

    ``open_wire`` builds one more Wire like the primary (same config, timeouts and deadline).
    A lane that cannot be opened is left out (logged): the caller then spreads over fewer
    lanes, which is always safe because nothing was sent on it. After such a failure no more
    are tried (a cluster that refuses more connections would cost every batch the wait).
    """

    def __init__(self, primary: Wire, open_wire: Callable[[], Wire]):
        self.primary = primary
        self._open_wire = open_wire
        self._extra: list[Wire] = []
        self._lock = threading.Lock()
        self._refused = False

    def wires(self, count: int) -> list[Wire]:
        """Up to ``count`` Wires (the primary first), opening the missing ones in parallel."""
        with self._lock:
            missing = 0 if self._refused else max(0, count - 1 - len(self._extra))
            if missing:
                with ThreadPoolExecutor(max_workers=missing, thread_name_prefix="kafka-eos-lane") as pool:
                    futures = [pool.submit(self._open_wire) for _ in range(missing)]
                    for future in futures:
                        try:
                            self._extra.append(future.result())
                        except KafkaEosError as err:
                            self._refused = True
                            log.warning("could not open an extra connection lane (%s); using fewer", err)
            return [self.primary, *self._extra][: max(1, count)]

    @property
    def opened(self) -> int:
        """Lanes open now, the primary included."""
        return 1 + len(self._extra)

    def requests(self) -> Counter[str]:
        """Requests sent on every lane, per API."""
        total: Counter[str] = Counter(self.primary.requests)
        for wire in self._extra:
            total.update(wire.requests)
        return total

    def close(self) -> None:
        """Close the extra lanes (the primary belongs to the caller)."""
        with self._lock:
            extra, self._extra = self._extra, []
        for wire in extra:
            try:
                wire.close()
            except Exception as exc:  # best effort: closing must not hide the caller's result
                log.debug("closing a lane failed: %s", exc)
