"""One writer per pipeline at a time: the writer lease, taken before restore, given back after the vote.

Restore (``restore.py``) aborts every open transaction under the pipeline's prefix that no PREPARED
manifest lists: what a crashed attempt left. That is only right while nobody else is preparing a
checkpoint of the same pipeline: a second run's transactions are open and listed nowhere until its
vote is written, so two overlapping runs abort each other's prepared records (measured in the
trigger soak, docs/soak.md: backfills and re-triggers beside the schedule). POOLING makes it worse:
both runs use the same ids and fence each other. So the writer holds the pipeline's lease, one object
in the manifest store::

    <base>/<pipeline_id>/_writer.json
    {"schema_version": 1, "pipeline_id": ..., "transactional_id_prefix": ..., "checkpoint_id": ...,
     "holder": {run} | null, "host": ..., "pid": ..., "token": ..., "taken_at_ms": ..., "expires_at_ms": ...}

from before it lists the pipeline's manifests (restore's listing) until its PREPARED manifest is
written; the next writer's listing therefore sees that manifest, and never an unlisted open
transaction of a live writer. The rule, owned here:

- no lease, a released one or an expired one: take it (create-if-absent / compare-and-set, so of
  two writers exactly one wins);
- a live lease of the same checkpoint: take it over. It is a retry of this checkpoint (a task retry,
  a resubmitted job), and the same transactional ids fence whatever the earlier attempt still does;
- a live lease of another checkpoint: wait, polling, up to ``wait_s``; then
  :class:`PipelineBusyError`, nothing written (the task's retry tries again).

An abort from outside (the cleanup DAG, the abort operator, ``kafka-eos-txn abort``) reads the live
leases too (:func:`live_writers`) and leaves a writing pipeline's prefix alone: its open transactions
may be the checkpoint being prepared (``abort_plan.py`` refuses them).

The holder renews the lease in the background (every quarter of its time to live), and confirms it
synchronously right before the vote: a writer whose lease was taken over (it stalled past the time to
live, and another writer's restore may have aborted its transactions) writes no vote and raises.
A writer that dies stops renewing; its lease expires after ``ttl_s`` and the next writer's restore
aborts what it left. Expiry compares wall clocks of the writers' hosts: keep them in NTP's reach
of each other (seconds), far below the time to live.

No Airflow imports: the Spark driver takes the lease.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import (
    STANDARD_CHAIN,
    StoreAccess,
    create_object,
    read_versioned,
    replace_if,
)
from airflow_provider_kafka_eos.kafka.errors import ManifestError, ManifestStoreError, PipelineBusyError

__all__ = ["DEFAULT_TTL_S", "DEFAULT_WAIT_S", "WriterLease", "described", "lease_uri", "live_lease",
           "live_writers", "load_writing", "read_lease", "writer_lease"]

log = logging.getLogger(__name__)

LEASE_OBJECT = "_writer.json"
DEFAULT_TTL_S = 60.0  # a dead writer blocks its pipeline this long at most
DEFAULT_WAIT_S = 600.0  # how long a writer queues behind another run of its pipeline
_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class WriterLease:
    """The lease object's content: who writes which checkpoint of the pipeline, until when."""

    pipeline_id: str
    transactional_id_prefix: str
    checkpoint_id: int
    holder: RunIdentity | None
    host: str
    pid: int
    token: str
    taken_at_ms: int
    expires_at_ms: int

    def live(self, now_ms: int) -> bool:
        return self.expires_at_ms > now_ms

    def describe(self) -> str:
        who = self.holder.describe() if self.holder is not None else "a writer that recorded no run"
        return f"{who}, checkpoint {self.checkpoint_id}, on {self.host} (pid {self.pid})"

    def to_json(self) -> bytes:
        return json.dumps({
            "schema_version": _SCHEMA_VERSION, "pipeline_id": self.pipeline_id,
            "transactional_id_prefix": self.transactional_id_prefix, "checkpoint_id": self.checkpoint_id,
            "holder": self.holder.to_dict() if self.holder is not None else None,
            "host": self.host, "pid": self.pid, "token": self.token,
            "taken_at_ms": self.taken_at_ms, "expires_at_ms": self.expires_at_ms,
        }, sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, *, source: str) -> WriterLease:
        try:
            value = json.loads(data)
            owner = value["holder"]
            holder = RunIdentity.from_dict(owner, source=source, field="holder") if owner else None
            return cls(pipeline_id=str(value["pipeline_id"]),
                       transactional_id_prefix=str(value["transactional_id_prefix"]),
                       checkpoint_id=int(value["checkpoint_id"]),
                       holder=holder,
                       host=str(value["host"]), pid=int(value["pid"]), token=str(value["token"]),
                       taken_at_ms=int(value["taken_at_ms"]), expires_at_ms=int(value["expires_at_ms"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ManifestError(
                f"writer lease {source} is malformed ({type(exc).__name__}: {exc}). No writer of this "
                f"pipeline can start while it is unreadable: once no job of the pipeline runs, delete "
                f"{source} (it holds no data) and retry", runbook="overlapping-runs") from None


def lease_uri(store: ManifestStore, pipeline_id: str) -> str:
    return f"{store.base_uri}/{pipeline_id}/{LEASE_OBJECT}"


def read_lease(store: ManifestStore, pipeline_id: str) -> WriterLease | None:
    """The pipeline's lease as stored (live, expired or released), None when there is none."""
    found = _read(store, lease_uri(store, pipeline_id))
    return found[0] if found is not None else None


def live_lease(store: ManifestStore, pipeline_id: str) -> WriterLease | None:
    """The pipeline's lease while a writer holds it; None when absent, given back or expired."""
    lease = read_lease(store, pipeline_id)
    return lease if lease is not None and lease.live(_now_ms()) else None


def live_writers(store: ManifestStore) -> dict[str, WriterLease]:
    """Transactional-id prefix -> the live lease of the pipeline writing under it, for every pipeline
    of the store (one read each). An unreadable store or lease raises: an abort then refuses."""
    leases = (live_lease(store, pipeline) for pipeline in store.pipelines())
    return {lease.transactional_id_prefix: lease for lease in leases if lease is not None}


def described(store: ManifestStore, lease: WriterLease) -> str:
    """The live writer as an abort's refusal and ``kafka-eos-txn checkpoints`` name it."""
    return (f"{lease.describe()} (writer lease {lease_uri(store, lease.pipeline_id)}, renewed until "
            f"{_iso(lease.expires_at_ms)})")


def load_writing(base_uri: str | None, *, protect: bool = True, source: str = "manifest_base_uri",
                 access: StoreAccess = STANDARD_CHAIN) -> dict[str, str]:
    """Prefix -> its live writer, described, for an abort from outside the writer (``AbortPolicy.writing``).

    ``protect=False`` (the explicit unprotected abort) asks nothing. Read after the PREPARED index,
    whose reading already refused an unusable store; an unreadable lease refuses the abort too."""
    if not protect:
        return {}
    store = ManifestStore.configured(base_uri, source=source, access=access)
    return {prefix: described(store, lease) for prefix, lease in live_writers(store).items()}


@contextmanager
def writer_lease(
    store: ManifestStore,
    *,
    pipeline_id: str,
    transactional_id_prefix: str,
    checkpoint_id: int,
    holder: RunIdentity | None,
    ttl_s: float = DEFAULT_TTL_S,
    wait_s: float = DEFAULT_WAIT_S,
    poll_s: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[_HeldLease]:
    """Hold the pipeline's writer lease for the block (see the module docstring for the rule).

    The block gets the held lease; it calls :meth:`_HeldLease.confirm` right before its vote.
    The lease is given back when the block ends, whatever ends it. Only writers take it, so it
    creates the store first (``ManifestStore.create``: a writer's first run on a new location).
    """
    store.create()
    held = _acquire(store, (pipeline_id, transactional_id_prefix), checkpoint_id, holder, ttl_s, wait_s,
                    poll_s, clock, sleep)
    renewer = threading.Thread(target=held.renew_until_released, name=f"kafka-eos-lease-{pipeline_id}",
                               daemon=True)
    renewer.start()
    try:
        yield held
    finally:
        held.release()
        renewer.join(timeout=ttl_s)


class _HeldLease:
    """A lease this process holds: renewed in the background, confirmed before the vote, released."""

    def __init__(self, store: ManifestStore, lease: WriterLease, ttl_s: float) -> None:
        self._store, self._lease, self._ttl_ms = store, lease, int(ttl_s * 1000)
        self._uri = lease_uri(store, lease.pipeline_id)
        self._released = threading.Event()
        self._lost: str | None = None
        # The renewal thread, confirm() and release() each read-then-swap the object: one at a time,
        # or two swaps of this holder race and the loser reads its own token as "taken over".
        self._swapping = threading.Lock()

    @property
    def lease(self) -> WriterLease:
        return self._lease

    def confirm(self) -> None:
        """Renew now, and raise :class:`PipelineBusyError` unless this writer still holds the lease:
        the vote may only be written by the pipeline's one writer."""
        if self._lost is None:
            self._renew()
        if self._lost is not None:
            raise PipelineBusyError(
                f"pipeline {self._lease.pipeline_id}: checkpoint {self._lease.checkpoint_id} lost its writer "
                f"lease ({self._uri}) before its vote: {self._lost}. Its transactions may have been aborted "
                "by the other writer's restore, so no manifest was written; the next attempt of this "
                "checkpoint writes it again (nothing of it is visible)", runbook="overlapping-runs")

    def renew_until_released(self) -> None:
        interval = self._ttl_ms / 4000
        while not self._released.wait(interval) and self._lost is None:
            try:
                self._renew()
            except ManifestStoreError as exc:  # the store did not answer: the next tick or confirm() retries
                log.warning("writer lease %s not renewed this time: %s", self._uri, exc)

    def release(self) -> None:
        """Give the lease back (expired at once), unless someone took it over meanwhile."""
        self._released.set()
        if self._lost is not None:
            return
        try:
            self._swap(lambda lease: _with_expiry(lease, 0))
        except ManifestStoreError as exc:  # it expires by itself after the time to live
            log.warning("writer lease %s not released (%s): it expires in %.0f s", self._uri, exc,
                        self._ttl_ms / 1000)

    def _renew(self) -> None:
        self._swap(lambda lease: _with_expiry(lease, _now_ms() + self._ttl_ms))

    def _swap(self, change: Callable[[WriterLease], WriterLease]) -> None:
        with self._swapping:
            if self._lost is None:
                self._swap_unlocked(change)

    def _swap_unlocked(self, change: Callable[[WriterLease], WriterLease]) -> None:
        found = _read(self._store, self._uri)
        if found is None or found[0].token != self._lease.token:
            self._lose(found[0] if found is not None else None)
            return
        new = change(self._lease)
        if not _replace(self._store, self._uri, new, found[1]):
            self._lose(read_lease(self._store, self._lease.pipeline_id))
            return
        self._lease = new

    def _lose(self, other: WriterLease | None) -> None:
        self._lost = (f"taken over by {other.describe()}" if other is not None
                      else "its lease object was removed")
        log.error("pipeline %s: writer lease of checkpoint %d %s", self._lease.pipeline_id,
                  self._lease.checkpoint_id, self._lost)


def _acquire(store: ManifestStore, pipeline: tuple[str, str], checkpoint_id: int, holder: RunIdentity | None,
             ttl_s: float, wait_s: float, poll_s: float, clock: Callable[[], float],
             sleep: Callable[[float], None]) -> _HeldLease:
    pipeline_id, prefix = pipeline
    uri = lease_uri(store, pipeline_id)
    deadline = clock() + wait_s
    announced = False
    while True:
        mine = WriterLease(pipeline_id, prefix, checkpoint_id, holder, socket.gethostname(), os.getpid(),
                           uuid.uuid4().hex, _now_ms(), _now_ms() + int(ttl_s * 1000))
        found = _read(store, uri)
        if found is None:
            if _create(store, uri, mine):
                return _HeldLease(store, mine, ttl_s)
            continue  # another writer created it first: read theirs
        other, version = found
        if not other.live(_now_ms()) or other.checkpoint_id == checkpoint_id:
            if other.live(_now_ms()):
                log.warning("pipeline %s: taking the writer lease over from an earlier attempt of checkpoint "
                            "%d (%s); the same transactional ids fence it", pipeline_id, checkpoint_id,
                            other.describe())
            if _replace(store, uri, mine, version):
                return _HeldLease(store, mine, ttl_s)
            continue  # it changed between our read and our write: read again
        if clock() >= deadline:
            raise PipelineBusyError(
                f"pipeline {pipeline_id}: checkpoint {checkpoint_id} cannot start, another run is writing "
                f"the pipeline ({other.describe()}; lease {uri}, renewed until {_iso(other.expires_at_ms)}); "
                f"waited {wait_s:.0f} s. Two writers at once would abort each other's prepared transactions, "
                "so nothing was written. Retry once that run has prepared its checkpoint (its task's retry "
                "does), or keep one run of the pipeline at a time (max_active_runs=1)",
                runbook="overlapping-runs")
        if not announced:
            log.info("pipeline %s: checkpoint %d waits for the writer lease held by %s", pipeline_id,
                     checkpoint_id, other.describe())
            announced = True
        sleep(max(0.0, min(poll_s, deadline - clock())))


def _with_expiry(lease: WriterLease, expires_at_ms: int) -> WriterLease:
    return dataclasses.replace(lease, expires_at_ms=expires_at_ms)


def _read(store: ManifestStore, uri: str) -> tuple[WriterLease, str] | None:
    try:
        found = read_versioned(uri, access=store.access)
    except OSError as exc:
        raise _unreachable(store, uri, exc) from None
    if found is None:
        return None
    return WriterLease.from_json(found[0], source=uri), found[1]


def _create(store: ManifestStore, uri: str, lease: WriterLease) -> bool:
    try:
        return create_object(uri, lease.to_json(), access=store.access)
    except OSError as exc:
        raise _unreachable(store, uri, exc) from None


def _replace(store: ManifestStore, uri: str, lease: WriterLease, version: str) -> bool:
    try:
        return replace_if(uri, lease.to_json(), version, access=store.access)
    except OSError as exc:
        raise _unreachable(store, uri, exc) from None


def _unreachable(store: ManifestStore, uri: str, exc: Exception) -> ManifestStoreError:
    return ManifestStoreError(
        f"manifest store {store.base_uri} ({store.source}): the pipeline's writer lease {uri} cannot be read "
        f"or written ({exc}). Nothing was written: without the lease this writer cannot know that no other "
        "run is preparing the pipeline. Retry once the store is reachable")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))

