"""The checker's rules for the Kafka-input pipeline (``./run soak --input kafka|both``).

Independent of the provider, as ``soak_checker.py``: the input and output topics read with
kafka-python's plain consumer, the consumer group's offsets with its admin client, the manifests
as JSON (``input.kafka.ranges``, docs/manifest-format.md), the feeder's history
(``soak_feeder.py``). The truth about the input is the input topic itself, read_committed: the
feeder's ``unknown`` outcomes are whatever Kafka decided.

The rules, per input record (the example job keeps each record's key, and every input key is
unique, so an output key names the input record it came from):
- a committed input record inside the range of a COMMITTED checkpoint is in the output exactly
  once (missing: *lost*; twice: *duplicated*); during the run a missing one written past the
  output's last stable offset is *not yet visible* (an earlier open transaction holds it back);
- a committed input record outside every COMMITTED range is not in the output: an *aborted
  read*, except during the run when a PREPARED checkpoint's range holds it (its commit is under
  way: a commit ends one transaction after another); after the final run it is *lost* (nothing
  may be left unread when the input stopped and a run read up to the end);
- a record of a transaction the feeder aborted is never in the input read_committed nor in the
  output (an *aborted read*); a record the feeder saw committed is in the input (else *lost*);
- the ranges of two COMMITTED checkpoints never overlap on a partition (a *double commit*: the
  same input read into two checkpoints);
- output keys that are no committed input record are *unexpected*;
- after the final run the group's committed offsets equal the end of the COMMITTED ranges on
  every partition (listed as *stuck* otherwise: the consumer group did not follow).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from soak_checker import Verdict, judge_copies, reading


def group_offsets(config: Mapping[str, Any], group: str, topic: str,
                  timeout_s: float = 60.0) -> dict[int, int]:
    """The group's committed offsets of ``topic``'s partitions (OffsetFetch), by partition.

    Asked again while Kafka answers with a retriable error (:func:`soak_checker.reading`): a
    fresh cluster has no ``__consumer_offsets`` yet (CoordinatorNotAvailable), and after a node
    restart the group's coordinator may be loading or elsewhere."""
    from kafka import KafkaAdminClient

    def fetch() -> dict[int, int]:
        admin = KafkaAdminClient(**dict(config))
        try:
            offsets = admin.list_group_offsets({group: None}).get(group, {})
        finally:
            admin.close()
        return {tp.partition: meta.offset for tp, meta in offsets.items()
                if tp.topic == topic and meta.offset >= 0}

    return reading(f"the offsets of group {group}", fetch, timeout_s)


def _ranges(manifests: Iterable[Mapping[str, Any]], status: str) -> list[tuple[int, int, int, int]]:
    """``(checkpoint, partition, from, to)`` of every checkpoint in ``status``."""
    found = []
    for manifest in manifests:
        kafka = ((manifest.get("input") or {}).get("kafka")) or {}
        if manifest["status"] == status:
            found += [(manifest["checkpoint_id"], r["partition"], r["from"], r["to"])
                      for r in kafka.get("ranges", [])]
    return found


def _covering(ranges: list[tuple[int, int, int, int]], partition: int, offset: int) -> list[int]:
    return [checkpoint for checkpoint, p, low, high in ranges if p == partition and low <= offset < high]


def judge_kafka_input(history: Iterable[Mapping[str, Any]], manifests: Iterable[Mapping[str, Any]],
                      inputs: Iterable[tuple[int, int, str]], counts: Mapping[str, int], *, final: bool,
                      not_yet_visible: Iterable[str] = (),
                      offsets: Mapping[int, int] | None = None) -> Verdict:
    """The verdict on one reading. ``inputs``: the input topic read_committed, ``(partition, offset,
    key)``; ``counts``: the output's keys read_committed; ``offsets``: the group's committed offsets
    (judged when ``final``)."""
    manifests = list(manifests)
    pending = set(not_yet_visible)
    written: dict[str, str] = {}
    for event in history:
        if event["kind"] == "input":
            for key in event["keys"]:
                written[key] = event["outcome"]
    committed_ranges = _ranges(manifests, "COMMITTED")
    prepared_ranges = _ranges(manifests, "PREPARED")
    verdict = Verdict(batches=len({key.split(":", 1)[0] for key in written}))
    verdict.committed_checkpoints = sum(1 for m in manifests if m["status"] == "COMMITTED")

    by_partition: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for checkpoint, partition, low, high in committed_ranges:
        for other, low2, high2 in by_partition[partition]:
            if low < high2 and low2 < high:
                verdict.double_commits.append(f"input partition {partition}: checkpoints {other} "
                                              f"[{low2}, {high2}) and {checkpoint} [{low}, {high}) overlap")
        by_partition[partition].append((checkpoint, low, high))

    seen_input: set[str] = set()
    for partition, offset, key in inputs:
        seen_input.add(key)
        verdict.keys_checked += 1
        outcome, copies = written.get(key), counts.get(key, 0)
        where = f"{key} (input partition {partition} offset {offset})"
        if outcome == "aborted":
            verdict.aborted_reads.append(f"{where}: its transaction was aborted, yet read_committed shows it")
            continue
        covered = _covering(committed_ranges, partition, offset)
        holder = covered[0] if covered else None
        judge_copies(verdict, where, copies, committed=bool(covered),
                     in_flight=bool(_covering(prepared_ranges, partition, offset)), hidden=key in pending,
                     final=final, lost=f"{where}: in COMMITTED checkpoint {holder}, not in the output",
                     aborted=f"{where}: in the output, in no COMMITTED checkpoint's range")
        if not covered and copies == 0 and final:
            verdict.lost.append(f"{where}: never read (no COMMITTED checkpoint's range holds it)")
    for key, outcome in written.items():
        if outcome == "committed" and key not in seen_input:
            verdict.lost.append(f"{key}: committed by the feeder, not in the input topic")
        if outcome == "aborted" and counts.get(key, 0):
            verdict.aborted_reads.append(f"{key}: its input transaction was aborted, yet it is in the output")
    verdict.unexpected = sorted(f"{key} x{n}" for key, n in counts.items()
                                if key not in seen_input and written.get(key) != "aborted")
    if final and offsets is not None:
        ends: dict[int, int] = {}
        for _, partition, _, high in committed_ranges:
            ends[partition] = max(ends.get(partition, 0), high)
        for partition in sorted(set(ends) | set(offsets)):
            if offsets.get(partition, 0) != ends.get(partition, 0):
                verdict.stuck.append(f"group offset of input partition {partition} is "
                                     f"{offsets.get(partition)}, the COMMITTED checkpoints end at "
                                     f"{ends.get(partition, 0)}")
    return verdict
