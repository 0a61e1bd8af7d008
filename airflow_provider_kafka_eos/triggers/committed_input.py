"""The committed-input trigger: start a Kafka-input pipeline when committed input is waiting.

An event-driven trigger (``BaseEventTrigger``) for an ``AssetWatcher``: it fires when the input
topic's *committed* records past the ``to`` of the pipeline's last COMMITTED checkpoint reach
``min_records``, or when at least one has waited ``max_wait_s`` seconds (its record timestamp). It
never fires for aborted input or for a transaction still open (``kafka/operations/committed_input.py``:
counted with a ``read_committed`` consumer up to the last stable offset, not the high watermark).

One poll per input topic however many DAGs watch it: the poll (the topic's last stable offsets,
every ``poll_interval_s``) is the triggerer's *shared stream*, keyed by the first bootstrap server
and the topic (``shared_stream_key``, Airflow >= 3.3); each trigger only filters it, counting
committed records when the offsets moved past its own pipeline's base. On Airflow before 3.3 each
trigger runs the same poll for itself (``run``).

After it fired, a trigger fires again only once its pipeline's base moved (a checkpoint committed:
the run it started consumed the input), or after ``refire_after_s`` when the base did not move (the
run failed or was given up: the input still waits). A failed look is logged and retried at the next
poll (a broker restart must not stop the watcher); the poll itself failing ends the stream, as
Airflow's shared streams do.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Hashable
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_provider_kafka_eos.assets.lineage import kafka_namespace
from airflow_provider_kafka_eos.kafka.operations.committed_input import (
    Backlog,
    committed_backlog,
    committed_bases,
    lso_snapshot,
)

__all__ = ["CommittedInputTrigger"]


def _settings(conn_id: str) -> dict[str, Any]:
    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

    return dict(KafkaEosHook(kafka_eos_conn_id=conn_id).client_config().confluent())


def _look(kwargs: dict[str, Any], stable: dict[int, int]) -> Backlog:
    """The pipeline's bases from its manifest store, then the committed records past them (blocking)."""
    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import find_manifests, store_exists

    hook = KafkaEosHook(kafka_eos_conn_id=kwargs["kafka_eos_conn_id"])
    base, _ = hook.manifest_store_setting(kwargs.get("manifest_base_uri"))
    manifests = []
    if base:
        access = hook.store_access(base)
        if store_exists(base, access=access):
            manifests = [m for _, m in find_manifests(base, kwargs["pipeline_id"], access=access)]
    return committed_backlog(
        dict(hook.client_config().confluent()), kwargs["input_topic"], stable,
        committed_bases(manifests, kwargs["input_topic"]), group=kwargs.get("group"),
        cap=int(kwargs["min_records"]),
    )


class CommittedInputTrigger(BaseEventTrigger):
    """Fires (for an ``AssetWatcher``) when committed input waits for pipeline ``pipeline_id``.

    :param kafka_eos_conn_id: the connection to the input's cluster (its ``manifest_base_uri`` too).
    :param pipeline_id: the Kafka-input pipeline whose COMMITTED checkpoints set the base.
    :param input_topic: the topic it reads.
    :param group: its consumer group: the base of a partition no checkpoint read yet (else the log start).
    :param manifest_base_uri: the pipeline's store, when not the connection's.
    :param min_records: fire at this many committed records waiting (N).
    :param max_wait_s: or when the oldest committed record waiting is this old (T).
    :param poll_interval_s: how often the shared poll reads the last stable offsets.
    :param refire_after_s: fire again for the same base after this long (the started run did not commit).
    """

    def __init__(
        self,
        *,
        kafka_eos_conn_id: str,
        pipeline_id: str,
        input_topic: str,
        group: str | None = None,
        manifest_base_uri: str | None = None,
        min_records: int = 1000,
        max_wait_s: float = 300.0,
        poll_interval_s: float = 30.0,
        refire_after_s: float = 900.0,
    ) -> None:
        super().__init__()
        if int(min_records) < 1 or float(max_wait_s) < 0 or float(poll_interval_s) <= 0:
            raise ValueError(f"CommittedInputTrigger for {pipeline_id!r}: min_records must be >= 1, "
                             f"max_wait_s >= 0 and poll_interval_s > 0 (got {min_records}, {max_wait_s}, "
                             f"{poll_interval_s})")
        self.kafka_eos_conn_id = kafka_eos_conn_id
        self.pipeline_id = pipeline_id
        self.input_topic = input_topic
        self.group = group
        self.manifest_base_uri = manifest_base_uri
        self.min_records = int(min_records)
        self.max_wait_s = float(max_wait_s)
        self.poll_interval_s = float(poll_interval_s)
        self.refire_after_s = float(refire_after_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "kafka_eos_conn_id": self.kafka_eos_conn_id,
                "pipeline_id": self.pipeline_id,
                "input_topic": self.input_topic,
                "group": self.group,
                "manifest_base_uri": self.manifest_base_uri,
                "min_records": self.min_records,
                "max_wait_s": self.max_wait_s,
                "poll_interval_s": self.poll_interval_s,
                "refire_after_s": self.refire_after_s,
            },
        )

    def shared_stream_key(self) -> Hashable | None:
        """(cluster, topic, poll interval): the triggers watching one topic of one cluster share a poll."""
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

        bootstrap = KafkaEosHook(kafka_eos_conn_id=self.kafka_eos_conn_id).client_config().bootstrap_servers
        return ("kafka-eos-committed-input", kafka_namespace(bootstrap), self.input_topic,
                self.poll_interval_s)

    @classmethod
    async def open_shared_stream(cls, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        """The topic's last stable offsets, once per poll interval, forever (or until the poll fails)."""
        settings = _settings(kwargs["kafka_eos_conn_id"])
        while True:
            stable = await asyncio.to_thread(lso_snapshot, settings, kwargs["input_topic"])
            yield {"stable": stable}
            await asyncio.sleep(float(kwargs["poll_interval_s"]))  # the poll interval, not a synchronisation

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        kwargs = self.serialize()[1]
        fired: tuple[dict[int, int], float] | None = None  # (bases, monotonic time) of the last event
        last_stable: dict[int, int] | None = None
        waiting = False  # the last look found committed records that were not yet due
        async for tick in shared_stream:
            stable = {int(p): int(o) for p, o in tick["stable"].items()}
            if stable == last_stable and not waiting:
                continue
            last_stable = stable
            try:
                backlog = await asyncio.to_thread(_look, kwargs, stable)
            except Exception as err:  # retried at the next poll; the watcher goes on
                self.log.warning("committed input of %r for pipeline %r: look failed (%s); next poll in "
                                 "%.0f s", self.input_topic, self.pipeline_id, err, self.poll_interval_s)
                continue
            due = backlog.due(min_records=self.min_records, max_wait_s=self.max_wait_s,
                              now_ms=int(time.time() * 1000))
            waiting = backlog.records > 0 and not due
            if not due:
                continue
            recent = fired is not None and time.monotonic() - fired[1] < self.refire_after_s
            if recent and fired[0] == backlog.bases:
                continue  # the run started for this input has not committed yet
            fired = (backlog.bases, time.monotonic())
            self.log.info("committed input for pipeline %r: %s record(s) of %r past its last committed "
                          "checkpoint", self.pipeline_id, backlog.records, self.input_topic)
            yield TriggerEvent({
                "pipeline_id": self.pipeline_id,
                "input_topic": self.input_topic,
                "records": backlog.records,  # counted up to min_records
                "oldest_ms": backlog.oldest_ms,
                "bases": {str(p): o for p, o in sorted(backlog.bases.items())},
                "stable": {str(p): o for p, o in sorted(backlog.stable.items())},
            })

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Airflow without shared streams (< 3.3): this trigger's own poll, filtered the same way."""
        async for event in self.filter_shared_stream(type(self).open_shared_stream(self.serialize()[1])):
            yield event
