"""The range planner: which Kafka offsets a checkpoint reads, fixed before it reads anything.

The rule (docs/user-guide/kafka-to-kafka.md), owned here and nowhere else:

- ``from`` per partition = the ``to`` of the newest COMMITTED checkpoint of the pipeline (the
  manifest store is the source of truth; the consumer group only mirrors it). A checkpoint that
  was given up (ABORTED) moves nothing: the next one reads its range again.
- The pipeline's first checkpoint starts where the user said, explicitly (:class:`StartChoice`):
  the group's committed offsets, earliest, latest or a timestamp. A topic added to the input
  later starts the same way; a partition added to a topic already read starts at earliest
  (all of it is new to the pipeline).
- ``to`` = the partition's last stable offset when the checkpoint starts (``read_committed``), so
  a transaction still open on the input is never half read.
- A newer checkpoint never plans while an older one of the same pipeline is PREPARED, or planned
  but has no manifest yet (its job may still be writing): :class:`InputCheckpointPendingError`.
- A range Kafka no longer has (retention moved the log start past ``from``, the topic or
  partition was deleted) is :class:`InputRangeLostError` naming every lost range; only the
  explicit ``skip_lost_ranges`` goes on, and the skipped ranges are recorded with the checkpoint.
- The plan is stored before the job reads (``<store>/<pipeline>/_inputs/kafka-checkpoint-<id>.json``,
  created only if absent): a retry of the checkpoint reads the plan recorded first, never a new
  one. The manifest (the vote) carries the same plan in ``input.kafka`` when the job has written.

Pure logic plus the store's plan objects: the Kafka facts come in as an ``InputOffsets``-like
value (``kafka/admin/input_offsets.py``); no Airflow imports.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from airflow_provider_kafka_eos.kafka.checkpoints.kafka_input import (
    KafkaInput,
    PartitionRange,
    SkippedRange,
    StartChoice,
)
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    list_files,
    store_unreachable,
)
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import (
    STANDARD_CHAIN,
    StoreAccess,
    create_object,
    read_object,
    read_versioned,
    replace_if,
)
from airflow_provider_kafka_eos.kafka.errors import (
    CheckpointConflictError,
    InputCheckpointPendingError,
    InputRangeLostError,
    ManifestError,
    UsageError,
)

__all__ = [
    "KafkaFacts",
    "offsets_transactional_id",
    "plan_input",
    "plan_uri",
    "read_plan",
    "record_plan",
]

RUNBOOK_OFFSETS = "input-offsets"
_PLAN_PREFIX = "kafka-checkpoint-"
_BASIS_PREFIX = "kafka-after-"


class KafkaFacts(Protocol):
    """What the planner needs to know of the input topics (``kafka/admin/input_offsets.InputOffsets``)."""

    earliest: dict[tuple[str, int], int]
    stable: dict[tuple[str, int], int]
    missing_topics: frozenset[str]
    at_start: dict[tuple[str, int], int]


def offsets_transactional_id(prefix: str) -> str:
    """The one transactional id that moves a pipeline's group offsets (``<prefix>-offsets``).

    One id per pipeline is safe because only one checkpoint may hold the input at a time; each
    new offsets transaction fences (aborts) whatever a dead attempt left open under it.
    """
    return f"{prefix}-offsets"


def plan_input(
    *,
    pipeline_id: str,
    checkpoint_id: int,
    manifests: Sequence[Manifest],
    topics: Sequence[str],
    group: str,
    start: StartChoice | str,
    facts: KafkaFacts,
    offsets_transactional_id: str | None = None,
    skip_lost_ranges: bool = False,
    planned_without_manifest: Sequence[int] = (),
    now_ms: int | None = None,
) -> KafkaInput:
    """The offset ranges checkpoint ``checkpoint_id`` reads (see the module docstring for the rule).

    ``manifests``: the pipeline's manifests (any status); ``planned_without_manifest``: checkpoint
    ids whose plan is stored but whose job wrote no manifest yet.
    """
    start = StartChoice.parse(start)
    topics = sorted(set(topics))
    if not topics:
        raise UsageError("input_topics is empty: name the Kafka topic(s) the pipeline reads")
    if not group:
        raise UsageError("input_group is empty: name the consumer group whose offsets mirror the pipeline's "
                         "progress")
    _refuse_pending(pipeline_id, checkpoint_id, manifests, planned_without_manifest)
    previous = _previous(checkpoint_id, manifests)
    ranges: list[PartitionRange] = []
    skipped: list[SkippedRange] = []
    lost: list[str] = []

    def gone(topic: str, partition: int, begin: int, end: int | None, reason: str) -> None:
        shown = f"{topic}-{partition} [{begin}, {'?' if end is None else end})"
        lost.append(f"{shown}: {reason}")
        skipped.append(SkippedRange(topic, partition, begin, begin if end is None else end, reason))

    for r, reason in _vanished(previous, topics, facts):
        gone(r.topic, r.partition, r.end, None, reason)
    missing_new = sorted(t for t in topics if t in facts.missing_topics
                         and (previous is None or t not in previous.topics))
    if missing_new:
        raise UsageError(f"input topic(s) {', '.join(missing_new)} do not exist on the cluster: create "
                         "them or fix input_topics; nothing was read")
    no_group_offset: list[str] = []
    for key in sorted(facts.stable):
        topic, partition = key
        if topic not in topics:
            continue
        stable = facts.stable[key]
        earliest = facts.earliest.get(key, 0)
        begin = _begin(key, facts, previous, start)
        if begin is None:
            no_group_offset.append(f"{topic}-{partition}")
            continue
        if begin < earliest:
            gone(topic, partition, begin, earliest, f"retention removed offsets {begin}..{earliest - 1} "
                 f"before they were read (log start offset is now {earliest})")
            begin = earliest
        if stable < begin:
            gone(topic, partition, begin, None, f"the partition's end offset {stable} is before the recorded "
                 f"{begin} (topic deleted and re-created?)")
            continue
        ranges.append(PartitionRange(topic, partition, begin, stable))
    if no_group_offset:
        raise UsageError(f"input_start=group, but consumer group {group!r} has no committed offset for "
                         f"{', '.join(no_group_offset)}: choose earliest, latest or timestamp:<ms> for the "
                         "pipeline's first checkpoint; nothing was read")
    if lost and not skip_lost_ranges:
        raise InputRangeLostError(
            f"checkpoint {checkpoint_id} of {pipeline_id}: input Kafka no longer has: {'; '.join(lost)}. "
            "Nothing was read or written. Those records cannot be read any more; to go on without them, run "
            "with skip_lost_ranges=True (the skipped ranges are recorded in the checkpoint's manifest)")
    return KafkaInput(
        topics=tuple(topics), group=group, start=str(start), ranges=tuple(ranges),
        based_on=previous_id(checkpoint_id, manifests), planned_at_ms=now_ms if now_ms is not None else
        int(time.time() * 1000), skipped=tuple(skipped) if skip_lost_ranges else (),
        offsets_transactional_id=offsets_transactional_id,
    )


def _vanished(
    previous: KafkaInput | None, topics: Sequence[str], facts: KafkaFacts
) -> list[tuple[PartitionRange, str]]:
    """The previous checkpoint's ranges whose partition is gone (a topic no longer read keeps its
    progress where it is: not gone)."""
    if previous is None:
        return []
    found = []
    for r in previous.ranges:
        if r.topic not in topics:
            continue
        if r.topic in facts.missing_topics:
            found.append((r, f"topic {r.topic} no longer exists"))
        elif (r.topic, r.partition) not in facts.stable:
            found.append((r, f"partition {r.partition} of {r.topic} no longer exists"))
    return found


def _begin(
    key: tuple[str, int], facts: KafkaFacts, previous: KafkaInput | None, start: StartChoice
) -> int | None:
    """Where a partition's range begins: where the previous checkpoint's ended; a partition added
    since, at its earliest offset (all of it is new to the pipeline); on the first checkpoint, the
    start choice's offset. None: ``input_start=group`` and the group has no offset for it."""
    topic, partition = key
    before = previous.range_of(topic, partition) if previous is not None else None
    if before is not None:
        return before.end
    if previous is not None and topic in previous.topics:
        return facts.earliest.get(key, 0)
    if key in facts.at_start:
        return facts.at_start[key]
    if start.kind == "group":
        return None
    return facts.earliest.get(key, 0)


def _refuse_pending(pipeline_id: str, checkpoint_id: int, manifests: Sequence[Manifest],
                    planned_without_manifest: Sequence[int]) -> None:
    for m in sorted(manifests, key=lambda m: m.checkpoint_id):
        if m.checkpoint_id < checkpoint_id and m.status is ManifestStatus.PREPARED:
            raise InputCheckpointPendingError(
                f"checkpoint {checkpoint_id} of {pipeline_id} cannot plan its input: the older checkpoint "
                f"{m.checkpoint_id} ({m.uri}) is still PREPARED and holds the input range before it. "
                f"Commit it "
                f"(kafka-eos-txn commit --manifest {m.uri}) or give it up (kafka-eos-txn abort "
                f"--manifest "
                f"{m.uri}: its range is read again); nothing was read")
        if m.checkpoint_id > checkpoint_id and m.status is ManifestStatus.COMMITTED and _kafka(m) is not None:
            raise InputCheckpointPendingError(
                f"checkpoint {checkpoint_id} of {pipeline_id} is older than checkpoint "
                f"{m.checkpoint_id}, which "
                "already COMMITTED the input after it: Kafka input is read in checkpoint order; start a new "
                "checkpoint (a new run) instead of a backfill; nothing was read")
    older = sorted(c for c in planned_without_manifest if c < checkpoint_id)
    if older:
        raise InputCheckpointPendingError(
            f"checkpoint {checkpoint_id} of {pipeline_id} cannot plan its input: checkpoint {older[-1]} "
            f"planned "
            "its input range but wrote no manifest (its job may still be running). Rerun that checkpoint (it "
            "reads the same range), or, once its job is known to be dead, delete its plan "
            f"({_PLAN_PREFIX}{older[-1]:012d}.json under the pipeline's _inputs/) and the "
            f"{_BASIS_PREFIX}*.json claim there that names it; nothing was read")


def _kafka(manifest: Manifest) -> KafkaInput | None:
    return manifest.input.kafka if manifest.input is not None else None


def _previous(checkpoint_id: int, manifests: Sequence[Manifest]) -> KafkaInput | None:
    done = [m for m in manifests if m.status is ManifestStatus.COMMITTED and m.checkpoint_id < checkpoint_id
            and _kafka(m) is not None]
    return _kafka(max(done, key=lambda m: m.checkpoint_id)) if done else None


def previous_id(checkpoint_id: int, manifests: Sequence[Manifest]) -> int | None:
    done = [m.checkpoint_id for m in manifests if m.status is ManifestStatus.COMMITTED
            and m.checkpoint_id < checkpoint_id and _kafka(m) is not None]
    return max(done) if done else None


# -- the stored plan ---------------------------------------------------------------------------


def plan_uri(base_uri: str, pipeline_id: str, checkpoint_id: int) -> str:
    return f"{base_uri.rstrip('/')}/{pipeline_id}/_inputs/{_PLAN_PREFIX}{checkpoint_id:012d}.json"


def read_plan(base_uri: str, pipeline_id: str, checkpoint_id: int, *,
              access: StoreAccess = STANDARD_CHAIN) -> KafkaInput | None:
    uri = plan_uri(base_uri, pipeline_id, checkpoint_id)
    try:
        data = read_object(uri, access=access)
    except OSError as exc:
        raise store_unreachable(uri, exc, "read", "; nothing was read") from None
    if data is None:
        return None
    try:
        return KafkaInput.from_dict(json.loads(data.decode("utf-8")), source=uri, field="plan")
    except (ValueError, UnicodeDecodeError):
        raise ManifestError(f"{uri}: the input plan is not valid JSON") from None


def record_plan(base_uri: str, pipeline_id: str, checkpoint_id: int, plan: KafkaInput, *,
                access: StoreAccess = STANDARD_CHAIN) -> KafkaInput:
    """Store the plan unless one is stored already; return the one that stands (a retry's is the first).

    A stored plan for other topics or another group is a conflict (the checkpoint would read
    another input than its first attempt): refused, nothing read.
    """
    uri = plan_uri(base_uri, pipeline_id, checkpoint_id)
    data = (json.dumps(plan.to_dict(), indent=2, sort_keys=True) + "\n").encode("utf-8")
    try:
        if create_object(uri, data, access=access):
            return plan
    except OSError as exc:
        raise store_unreachable(uri, exc, "written", "; nothing was read") from None
    stored = read_plan(base_uri, pipeline_id, checkpoint_id, access=access)
    if stored is None:
        raise ManifestError(f"{uri}: the input plan vanished while it was being recorded; run again")
    if (stored.topics, stored.group) != (plan.topics, plan.group):
        raise CheckpointConflictError(
            f"checkpoint {checkpoint_id} of {pipeline_id} planned topics {', '.join(stored.topics)} "
            f"with group "
            f"{stored.group!r} first ({uri}); this attempt asks for {', '.join(plan.topics)} with group "
            f"{plan.group!r}. A checkpoint reads one input: run a new checkpoint for the new input",
            runbook=RUNBOOK_OFFSETS)
    return stored


def plans_without_manifest(base_uri: str, pipeline_id: str, manifests: Sequence[Manifest], *,
                           access: StoreAccess = STANDARD_CHAIN) -> list[int]:
    """Checkpoint ids with a stored plan but no manifest (their job has not voted, or died)."""
    have = {m.checkpoint_id for m in manifests}
    found = []
    for name in list_files(f"{base_uri.rstrip('/')}/{pipeline_id}/_inputs", access):
        if name.startswith(_PLAN_PREFIX) and name.endswith(".json"):
            digits = name[len(_PLAN_PREFIX):-len(".json")]
            if digits.isdigit() and int(digits) not in have:
                found.append(int(digits))
    return sorted(found)


Listing = list[tuple[str, Manifest]]  # a pipeline's manifests as the store listed them: (uri, manifest)


def plan_checkpoint_input(store: ManifestStore, *, pipeline_id: str, checkpoint_id: int, facts_for: Any,
                          settle: Callable[[Listing], Listing] | None = None, **kwargs: Any) -> KafkaInput:
    """Plan and record checkpoint ``checkpoint_id``'s input (a retry gets the stored plan back).

    ``facts_for(start)`` returns the Kafka facts (asked only when no
    plan is stored yet, so a retry does not even look at Kafka's offsets again). ``settle(listing)``
    settles the pipeline's older PREPARED checkpoints and returns the settled listing (the job
    passes restore's ``settle_before_planning``); without it an older PREPARED checkpoint is
    refused by name (``InputCheckpointPendingError``). The pipeline is listed once for the plan:
    settle and plan read the same listing (the write that follows lists once more, after the
    input's read, when the cleanup may have changed the store).
    """
    stored = read_plan(store.base_uri, pipeline_id, checkpoint_id, access=store.access)
    if stored is not None:
        return stored
    listing = store.manifests(pipeline_id)
    if settle is not None:
        listing = settle(listing)
    manifests = [m for _, m in listing]
    pending = plans_without_manifest(store.base_uri, pipeline_id, manifests, access=store.access)
    start = StartChoice.parse(kwargs.pop("start"))
    plan = plan_input(pipeline_id=pipeline_id, checkpoint_id=checkpoint_id, manifests=manifests,
                      start=start, facts=facts_for(start), planned_without_manifest=pending, **kwargs)
    claim_basis(store.base_uri, pipeline_id, checkpoint_id, previous_id(checkpoint_id, manifests), manifests,
                access=store.access)
    return record_plan(store.base_uri, pipeline_id, checkpoint_id, plan, access=store.access)


def basis_uri(base_uri: str, pipeline_id: str, previous: int | None) -> str:
    """Where the one checkpoint that reads on from ``previous`` (a COMMITTED checkpoint, or None: the
    pipeline's start) is named."""
    after = "start" if previous is None else f"{previous:012d}"
    return f"{base_uri.rstrip('/')}/{pipeline_id}/_inputs/{_BASIS_PREFIX}{after}.json"


def claim_basis(base_uri: str, pipeline_id: str, checkpoint_id: int, previous: int | None,
                manifests: Sequence[Manifest], *, access: StoreAccess = STANDARD_CHAIN) -> None:
    """Make ``checkpoint_id`` the one checkpoint reading on from ``previous``, or refuse by name.

    Why: the pending checks above read the store, then the plan is written; two runs planning at
    once (``max_active_runs`` above 1, two DAGs of one pipeline, a newer run planning before an older
    one) would both pass them and read the same range twice. The claim is one create-if-absent (a
    compare-and-set on S3), so exactly one wins. A holder that gave the range back (its manifest
    ABORTED: given up) is replaced by a compare-and-set of the version read.
    """
    uri = basis_uri(base_uri, pipeline_id, previous)
    mine = (json.dumps({"checkpoint_id": checkpoint_id}) + "\n").encode("utf-8")
    try:
        for _ in range(5):
            if create_object(uri, mine, access=access):
                return
            current = read_versioned(uri, access=access)
            if current is None:
                continue  # removed in between: create it again
            data, version = current
            holder = int(json.loads(data.decode("utf-8"))["checkpoint_id"])
            if holder == checkpoint_id:
                return  # a retry of this checkpoint after a claim whose plan was not written
            if not _gave_back(holder, manifests):
                after = "the pipeline's start" if previous is None else f"checkpoint {previous}"
                raise InputCheckpointPendingError(
                    f"checkpoint {checkpoint_id} of {pipeline_id} cannot plan its input: checkpoint {holder} "
                    f"already reads on from {after} ({uri}); two checkpoints reading one range would write "
                    "it twice. Let that run commit (or give it up), then run again; nothing was read")
            if replace_if(uri, mine, version, access=access):
                return
    except OSError as exc:
        raise store_unreachable(uri, exc, "written", "; nothing was read") from None
    raise InputCheckpointPendingError(
        f"checkpoint {checkpoint_id} of {pipeline_id}: the input claim {uri} kept changing under five "
        "attempts (other runs of this pipeline planning at the same time); run again; nothing was read")


def _gave_back(holder: int, manifests: Sequence[Manifest]) -> bool:
    """Only a given-up holder (manifest ABORTED) gives its range back: one without a manifest may be
    between its claim and its plan, or still reading (a dead one is released by hand: runbook)."""
    return any(m.checkpoint_id == holder and m.status is ManifestStatus.ABORTED for m in manifests)
