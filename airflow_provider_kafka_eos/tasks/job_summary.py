"""The paragraph that ends the submit task's log: what the Spark job did, in one place.

Why: Spark's own INFO stream is cut (``spark/log_config.py``), and an operator reading the log at
3 a.m. wants the outcome, not the stream: records, transactions, Kafka partitions, the time the
job took, and where the checkpoint stands.
"""

from __future__ import annotations

from typing import Any

__all__ = ["job_summary"]


def job_summary(manifest: Any, manifest_uri: str, elapsed_s: float) -> str:
    """One paragraph from the checkpoint manifest the job left (``PREPARED`` or ``COMMITTED``)."""
    committables = list(manifest.committables)
    counts = [c.record_count for c in committables]
    records = "an unknown number of" if any(c is None for c in counts) else str(sum(counts))
    partitions = sorted({(p.topic, p.partition) for c in committables for p in c.partitions})
    topics = sorted({topic for topic, _ in partitions})
    status = manifest.status.value
    next_step = "the commit task makes them visible" if status == "PREPARED" else "already committed"
    return (
        f"Spark job summary: pipeline {manifest.pipeline_id}, checkpoint {manifest.checkpoint_id}: "
        f"{records} record(s) in {len(committables)} transaction(s) (one per non-empty Spark partition) "
        f"across {len(partitions)} Kafka partition(s) of {', '.join(topics) or 'no topic'}; "
        f"spark-submit took {elapsed_s:.1f} s. Manifest {status} ({next_step}): {manifest_uri}"
    )
