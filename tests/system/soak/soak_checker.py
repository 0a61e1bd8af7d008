"""The soak's checker: what Kafka and the store show, held against the history, by its own means.

It imports nothing from the provider: it reads Kafka with kafka-python's plain consumer and admin
client, the manifests as JSON (their documented format, docs/manifest-format.md) from files or,
with ``--store s3``, with its own boto3 client (:class:`S3Manifests`), and the history
(``soak_history.py``). So a bug in the provider's own reading code cannot hide a bug in its
writing code.

The rules (issue 26), per input batch (the example pipeline keys every output record
``<batch>:<user>``, so a key names its batch):
- a batch committed by a COMMITTED checkpoint has each of its keys exactly once (a missing key
  is *lost*, a second copy *duplicated*);
- a batch with no COMMITTED checkpoint has none of its keys visible to read_committed (an
  *aborted read*); while the run goes on a PREPARED checkpoint may be committing, so a batch's
  keys only count as an aborted read when every checkpoint of it is ABORTED;
- two COMMITTED checkpoints of one batch are a *double commit* (the re-trigger bug);
- after the quiet period, a DAG run Airflow reported successful whose batch has no COMMITTED
  checkpoint is *lost* too (a run that skipped its batch as already written is successful
  because another run's checkpoint wrote it);
- keys that belong to no batch of the history are *unexpected*;
- after the quiet period and one cleanup run (:func:`stuck`): no PREPARED manifest, no open
  transaction under the pipeline's prefix, last stable offset = high watermark everywhere.
"""

from __future__ import annotations

import json
import pathlib
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Verdict:
    """What the checker found; ``ok`` when every list is empty."""

    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    aborted_reads: list[str] = field(default_factory=list)
    double_commits: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    batches: int = 0
    committed_checkpoints: int = 0
    keys_checked: int = 0
    not_yet_visible: int = 0  # keys of COMMITTED batches behind an open transaction (during the run)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.aborted_reads or self.double_commits
                    or self.unexpected or self.stuck)

    def summary(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "batches": self.batches, "committed_checkpoints": self.committed_checkpoints,
            "keys_checked": self.keys_checked, "not_yet_visible": self.not_yet_visible,
            "lost": len(self.lost), "duplicated": len(self.duplicated),
            "aborted_reads": len(self.aborted_reads), "double_commits": len(self.double_commits),
            "unexpected": len(self.unexpected), "stuck": len(self.stuck),
            "examples": {name: values[:5] for name, values in self._lists().items() if values},
        }

    def _lists(self) -> dict[str, list[str]]:
        return {"lost": self.lost, "duplicated": self.duplicated, "aborted_reads": self.aborted_reads,
                "double_commits": self.double_commits, "unexpected": self.unexpected, "stuck": self.stuck}


# -- the store ---------------------------------------------------------------------------------

@dataclass
class S3Manifests:
    """The manifests on an S3-API server, read with boto3 (not the provider's s3fs path).

    The driver reads the store every second; an object is fetched again only when the listing
    shows a new ETag, so a long soak's store costs one listing a second. Timeouts are short and
    bounded: the nemesis pauses the server for up to 8 s."""

    endpoint: str
    bucket: str
    prefix: str
    access_key: str
    secret_key: str
    region: str
    _cache: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict, repr=False)
    _client: Any = field(default=None, repr=False)

    def client(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.client(
                "s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                aws_secret_access_key=self.secret_key, region_name=self.region,
                config=Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 10}))
        return self._client

    def read_object(self, key: str) -> dict[str, Any] | None:
        """One JSON object under the prefix, None when it does not exist."""
        client = self.client()
        try:
            body = client.get_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}")["Body"].read()
        except client.exceptions.NoSuchKey:
            return None
        return json.loads(body)

    def read(self, pipeline_id: str) -> list[dict[str, Any]]:
        manifests = []
        pages = self.client().get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{self.prefix}/{pipeline_id}/checkpoint-")
        for page in pages:
            for item in page.get("Contents", []):
                key, etag = item["Key"], item["ETag"]
                if not key.endswith(".json"):
                    continue
                cached = self._cache.get(key)
                if cached is None or cached[0] != etag:
                    body = self.client().get_object(Bucket=self.bucket, Key=key)["Body"].read()
                    cached = self._cache[key] = (etag, json.loads(body))
                manifests.append(cached[1])
        return sorted(manifests, key=lambda m: m["checkpoint_id"])


def read_manifests(store: pathlib.Path | S3Manifests, pipeline_id: str) -> list[dict[str, Any]]:
    """Every checkpoint manifest of the pipeline, parsed as plain JSON (temp files left out)."""
    if isinstance(store, S3Manifests):
        return store.read(pipeline_id)
    folder = store / pipeline_id
    if not folder.is_dir():
        return []
    manifests = []
    for path in sorted(folder.glob("checkpoint-*.json")):
        manifests.append(json.loads(path.read_text(encoding="utf-8")))
    return manifests


def writer_lease(store: pathlib.Path | S3Manifests, pipeline_id: str) -> dict[str, Any] | None:
    """The pipeline's writer lease as stored (``<store>/<pipeline>/_writer.json``), None when there is
    none: a writer holds it from its restore to its vote (``expires_at_ms``: until when)."""
    if isinstance(store, S3Manifests):
        return store.read_object(f"{pipeline_id}/_writer.json")
    path = store / pipeline_id / "_writer.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# -- Kafka --------------------------------------------------------------------------------------

def reading(what: str, take: Callable[[], T], timeout_s: float = 120.0) -> T:
    """``take()``, taken again while Kafka answers with a retriable error, until the deadline.

    A reading during the run may ask the node the nemesis just killed: kafka-python raises then
    (KafkaConnectionError from a metadata refresh) instead of asking another node. That is no
    verdict on the pipeline, so the whole reading is taken again (the first soak of 2026-11-27
    died of it after 56 minutes, 103 checkpoints and every check clean). Anything else, or the
    same past the deadline, is raised."""
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return take()
        except KafkaError as exc:
            if not getattr(exc, "retriable", False):
                raise
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: Kafka could not be read in {timeout_s} s: {exc!r}") from exc
        time.sleep(1)  # retry interval of a deadline-bounded reading


def _partitions(consumer: Any, topic: str, timeout_s: float) -> list[Any]:
    from kafka import TopicPartition

    deadline = time.monotonic() + timeout_s
    while True:
        numbers = consumer.partitions_for_topic(topic)
        if numbers:
            return [TopicPartition(topic, p) for p in sorted(numbers)]
        if time.monotonic() > deadline:
            raise LookupError(f"topic {topic} has no partitions in the cluster's metadata")
        time.sleep(0.2)  # metadata poll interval, bounded by the deadline


def count_output(config: Mapping[str, Any], topic: str, *, timeout_s: float = 120.0) -> Counter[str]:
    """Every key in ``topic`` as a read_committed consumer sees it, up to the end offsets (LSO) of
    the moment the call starts; raises TimeoutError when they are not reached in time."""
    return read_output(config, topic, timeout_s=timeout_s)[0]


def read_output(config: Mapping[str, Any], topic: str, *,
                timeout_s: float = 120.0) -> tuple[Counter[str], set[str]]:
    """:func:`count_output`, and the keys written past the last stable offsets it read up to.

    Those keys are not yet visible to read_committed: on their partition an earlier transaction
    is still open (a checkpoint PREPARED before theirs, its commit not yet run), and Kafka shows
    nothing after it until it ends. A key of a COMMITTED batch among them is not lost yet; the
    second set, read with read_uncommitted from those offsets to the high watermark, names them."""
    from kafka import KafkaConsumer

    records, partitions, stable = _read_committed(config, topic, timeout_s)
    counts = Counter(key for _, _, key in records)
    consumer = KafkaConsumer(**dict(config), isolation_level="read_uncommitted", enable_auto_commit=False,
                             group_id=None, consumer_timeout_ms=1000)
    try:
        high = consumer.end_offsets(partitions)
        beyond = _read_keys(consumer, partitions, stable, high, timeout_s, "read_uncommitted")
    finally:
        consumer.close()
    return counts, set(beyond)


def _read_keys(consumer: Any, partitions: list[Any], starts: Mapping[Any, int] | None,
               ends: Mapping[Any, int], timeout_s: float, isolation: str) -> Counter[str]:
    """The keys from ``starts`` (None: the beginning) up to ``ends``, counted."""
    records = _read_records(consumer, partitions, starts, ends, timeout_s, isolation)
    return Counter(key for _, _, key in records)


def read_committed_records(config: Mapping[str, Any], topic: str, *,
                           timeout_s: float = 120.0) -> list[tuple[int, int, str]]:
    """Every record of ``topic`` a read_committed consumer sees, up to the last stable offsets of
    the moment the call starts: ``(partition, offset, key)``."""
    return _read_committed(config, topic, timeout_s)[0]


def _read_committed(config: Mapping[str, Any], topic: str,
                    timeout_s: float) -> tuple[list[tuple[int, int, str]], list[Any], dict[Any, int]]:
    """:func:`read_committed_records`, with the partitions and the last stable offsets it read to."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(**dict(config), isolation_level="read_committed", enable_auto_commit=False,
                             group_id=None, consumer_timeout_ms=1000)
    try:
        partitions = _partitions(consumer, topic, timeout_s)
        stable = consumer.end_offsets(partitions)
        records = _read_records(consumer, partitions, None, stable, timeout_s, "read_committed")
        return records, partitions, stable
    finally:
        consumer.close()


def _read_records(consumer: Any, partitions: list[Any], starts: Mapping[Any, int] | None,
                  ends: Mapping[Any, int], timeout_s: float, isolation: str) -> list[tuple[int, int, str]]:
    """``(partition, offset, key)`` of the records from ``starts`` (None: the beginning) up to ``ends``."""
    consumer.assign(partitions)
    if starts is None:
        consumer.seek_to_beginning(*partitions)
    else:
        for tp in partitions:
            consumer.seek(tp, starts[tp])
    found: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + timeout_s
    while any(consumer.position(tp) < ends[tp] for tp in partitions):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{isolation} reading did not reach {ends} in {timeout_s} s")
        for tp, records in consumer.poll(timeout_ms=500).items():
            for record in records:
                if record.offset < ends[tp]:
                    key = (record.key or b"").decode("utf-8", "replace")
                    found.append((tp.partition, record.offset, key))
    return found


def stuck(config: Mapping[str, Any], topic: str, transactional_id_prefix: str,
          manifests: Iterable[Mapping[str, Any]]) -> list[str]:
    """What is still open after the quiet period: PREPARED manifests, open transactions under the
    prefix, partitions whose last stable offset is behind their high watermark."""
    from kafka import KafkaAdminClient, KafkaConsumer

    found = [f"manifest {m['pipeline_id']}/{m['checkpoint_id']} still {m['status']}"
             for m in manifests if m["status"] == "PREPARED"]
    admin = KafkaAdminClient(**dict(config))
    try:
        listings = [txn for per_broker in admin.list_transactions().values() for txn in per_broker]
        for txn in listings:
            tid, state = txn.transactional_id, str(getattr(txn.state, "value", txn.state))
            if tid.startswith(transactional_id_prefix) and ("Ongoing" in state or "Prepare" in state):
                found.append(f"transaction {tid} still {state}")
    finally:
        admin.close()
    consumer_committed = KafkaConsumer(**dict(config), isolation_level="read_committed", group_id=None)
    consumer_all = KafkaConsumer(**dict(config), isolation_level="read_uncommitted", group_id=None)
    try:
        partitions = _partitions(consumer_all, topic, 30)
        lso = consumer_committed.end_offsets(partitions)
        hw = consumer_all.end_offsets(partitions)
        found += [f"{tp.topic}-{tp.partition}: last stable offset {lso[tp]} < high watermark {hw[tp]}"
                  for tp in partitions if lso[tp] != hw[tp]]
    finally:
        consumer_committed.close()
        consumer_all.close()
    return found


# -- the rules ------------------------------------------------------------------------------------

def batch_of(key: str) -> str:
    """The batch a key belongs to (``<batch>:<user>``)."""
    return key.split(":", 1)[0]


def judge_copies(verdict: Verdict, label: str, copies: int, *, committed: bool, in_flight: bool, hidden: bool,
                 final: bool, lost: str, aborted: str) -> None:
    """One output key's copies against its checkpoint's fate: the rule both workloads share.

    ``committed``: a COMMITTED checkpoint holds it (exactly one copy due); ``in_flight``: no
    verdict on it yet during the run (a checkpoint of it may still be committing);
    ``hidden``: written past the last stable offset of this reading (not yet visible).
    ``lost`` and ``aborted`` are the findings' texts."""
    if copies > 1:
        verdict.duplicated.append(f"{label} x{copies}")
    elif committed and copies == 0 and hidden and not final:
        verdict.not_yet_visible += 1
    elif committed and copies == 0:
        verdict.lost.append(lost)
    elif not committed and copies and (final or not in_flight):
        verdict.aborted_reads.append(aborted)


def judge(history: Iterable[Mapping[str, Any]], manifests: Iterable[Mapping[str, Any]],
          counts: Mapping[str, int], *, final: bool, not_yet_visible: Iterable[str] = ()) -> Verdict:
    """The verdict on one reading (``final``: after the quiet period, when nothing is in flight).

    ``not_yet_visible``: keys written past the last stable offsets of the reading
    (:func:`read_output`); during the run a missing key among them is not judged lost (an earlier
    checkpoint's open transaction holds its partition back). The final reading has none: the
    quiet period ends every transaction, and :func:`stuck` proves it."""
    pending = set(not_yet_visible)
    events = list(history)
    manifests = list(manifests)
    batches: dict[str, set[str]] = {}
    for event in events:
        if event["kind"] == "batch":
            batches[event["batch"]] = set(event["keys"])
    by_input: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for manifest in manifests:
        input_record = manifest.get("input") or {}
        if input_record.get("id"):
            by_input[input_record["id"]].append(manifest)
    verdict = Verdict(batches=len(batches))
    verdict.committed_checkpoints = sum(1 for m in manifests if m["status"] == "COMMITTED")
    for batch, keys in sorted(batches.items()):
        states = [m["status"] for m in by_input.get(batch, [])]
        committed = states.count("COMMITTED")
        verdict.keys_checked += len(keys)
        if committed > 1:
            verdict.double_commits.append(f"{batch}: {committed} COMMITTED checkpoints")
        given_up = bool(states) and set(states) == {"ABORTED"}
        for key in sorted(keys):
            judge_copies(verdict, key, counts.get(key, 0), committed=bool(committed), in_flight=not given_up,
                         hidden=key in pending, final=final, lost=f"{key} (batch {batch} COMMITTED)",
                         aborted=f"{key} (batch {batch}: checkpoints {states or 'none'})")
    for event in events:
        if final and event["kind"] == "run" and event.get("state") == "success":
            batch = event["batch"]
            if "COMMITTED" not in [m["status"] for m in by_input.get(batch, [])]:
                verdict.lost.append(f"run {event['run_id']} succeeded but batch {batch} has no COMMITTED "
                                    "checkpoint")
    known = set().union(*batches.values()) if batches else set()
    verdict.unexpected = sorted(f"{key} x{n}" for key, n in counts.items() if key not in known)
    return verdict
