"""A bounded history of each watched topic's last-stable-offset lag, for the operators' console.

Kafka keeps no history of a partition's last stable offset: it answers "where is it now". The
console plots how far it trails the high watermark over time, so every sensor poll that probes
LSOs (the sensor's ``lso_partitions`` / ``input_topics``) appends what it saw to a small JSON
ring per topic beside the manifests: ``<base>/_lso-history/<topic>.json``, at most
:data:`MAX_SAMPLES` samples (the oldest dropped), each ``{"at_ms", "partition", "lso", "hw",
"lag"}``. One file per topic, not rows in Airflow's database: the store is where the console
already reads a pipeline's checkpoints, the sensor already writes its findings there, and a
deployment without Airflow (the CLI's scans) keeps the same history.

Best effort by design: two sensors watching one topic may both rewrite its file and one poll's
samples be lost; a write that fails is logged and never fails the scan (the history is a view,
no decision reads it). No Airflow imports.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import (
    STANDARD_CHAIN,
    StoreAccess,
    read_object,
    replace_object,
)

__all__ = ["HISTORY_DIR", "MAX_SAMPLES", "history_uri", "read_history", "record_samples"]

log = logging.getLogger(__name__)

HISTORY_DIR = "_lso-history"
MAX_SAMPLES = 2000  # per topic: ~2 days of one partition at the sensor's 60 s poke, ~120 KB


def history_uri(base_uri: str, topic: str) -> str:
    return f"{base_uri.rstrip('/')}/{HISTORY_DIR}/{topic}.json"


def read_history(base_uri: str, topic: str, *, access: StoreAccess = STANDARD_CHAIN) -> list[dict[str, int]]:
    """The topic's samples, oldest first (empty: never sampled). An unreadable file raises OSError."""
    raw = read_object(history_uri(base_uri, topic), access=access)
    if raw is None:
        return []
    data = json.loads(raw.decode("utf-8"))
    return list(data.get("samples") or []) if isinstance(data, dict) else []


def record_samples(base_uri: str, polls: Iterable[Any], at_ms: int, *,
                   access: StoreAccess = STANDARD_CHAIN, keep: int = MAX_SAMPLES) -> list[str]:
    """Append one sample per polled partition (``PartitionOffsets``) to its topic's ring.

    Returns the files written. Failures are logged (naming the file), not raised: see the module.
    """
    by_topic: dict[str, list[dict[str, int]]] = {}
    for poll in polls:
        lso, hw = int(poll.last_stable_offset), int(poll.high_watermark)
        by_topic.setdefault(poll.topic, []).append(
            {"at_ms": at_ms, "partition": int(poll.partition), "lso": lso, "hw": hw, "lag": max(0, hw - lso)}
        )
    written = []
    for topic, samples in sorted(by_topic.items()):
        uri = history_uri(base_uri, topic)
        try:
            kept = (read_history(base_uri, topic, access=access) + samples)[-keep:]
            replace_object(uri, json.dumps({"topic": topic, "samples": kept}, separators=(",", ":"))
                           .encode("utf-8"), access=access)
            written.append(uri)
        except (OSError, ValueError) as exc:
            log.warning("LSO history %s not updated (%s: %s); the console's lag plot misses this poll. "
                        "Check the manifest store's permissions", uri, type(exc).__name__, exc)
    return written
