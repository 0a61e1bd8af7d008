"""A job started by any runner (``@task.pyspark``, spark-operator, Databricks, EMR, Dataproc, a notebook)
prepares one checkpoint per input, found later by pipeline id and input identity alone.

``SparkEosSubmitOperator`` claims the input on the Airflow worker and hands the job a checkpoint
id; a job some other operator starts has no such hand-off, and its driver's output and return
value may never reach Airflow. So here the job itself takes the input's claim
(``kafka/checkpoints/input_claims.py``: one object per input in the manifest store, naming the
checkpoint that carries it), then prepares that checkpoint with :func:`write_exactly_once`. The
commit task needs nothing from the job but the two names: ``KafkaCommitTransactionsOperator(
pipeline_id=..., input_id=...)`` reads the claim and commits the manifest it names
(docs/user-guide/own-runner.md). No Airflow import: this runs in the Spark driver.

Reruns follow the claim's rule, unchanged:

- the job retried or cleared within the same Airflow run (``run`` names it): the claimed
  checkpoint again, whose manifest the writer finds (nothing produced twice) or, if the first
  try died before its manifest, whose transactions the new try fences and writes afresh;
- another run over the same input: nothing written (:attr:`InputCheckpoint.written` False), the
  claimed checkpoint is what the commit task commits (or reports as committed again);
- ``reprocess=True``: the input written again as a new checkpoint, recorded in its manifest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord, RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.input_claims import InputVerdict, claim_input
from airflow_provider_kafka_eos.kafka.checkpoints.naming import pipeline_identity
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import STANDARD_CHAIN, StoreAccess
from airflow_provider_kafka_eos.spark.writer import write_exactly_once

__all__ = ["InputCheckpoint", "write_input_exactly_once"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InputCheckpoint:
    """What the job did with its input: ``written`` (this call prepared ``checkpoint_id``, or found
    its own earlier try's manifest) or not (another run's checkpoint holds the input). JSON-able,
    no secret: a runner may return it (XCom), but the commit task does not need it."""

    pipeline_id: str
    input_id: str
    checkpoint_id: int
    manifest_uri: str
    written: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"pipeline_id": self.pipeline_id, "input_id": self.input_id,
                "checkpoint_id": self.checkpoint_id, "manifest_uri": self.manifest_uri,
                "written": self.written, "message": self.message}


def write_input_exactly_once(
    df: Any,
    *,
    pipeline_id: str,
    input_id: str,
    topic: str,
    kafka_config: Any,
    manifest_base_uri: str,
    run: RunIdentity | Mapping[str, Any] | None = None,
    reprocess: bool = False,
    store_access: StoreAccess = STANDARD_CHAIN,
    run_is_active: Callable[[RunIdentity], bool | None] = lambda _run: None,
    claim_timeout_s: float = 300.0,
    checkpoint_id: int | None = None,
    **writer_options: Any,
) -> InputCheckpoint:
    """Claim ``input_id`` for ``pipeline_id`` and prepare its checkpoint of ``df`` (module doc).

    ``run``: the Airflow run the job belongs to (``RunIdentity`` or its dict: ``dag_id``, ``run_id``,
    ``try_number``, ``logical_date``); with it a retry of the job writes into the checkpoint its
    first try claimed. Without it every call is a new writer: a retry whose first try died before
    its manifest waits for that claim (``run_is_active`` may say the claimant stopped) up to
    ``claim_timeout_s``, then fails with InputBusyError. ``checkpoint_id``: the id a new input gets
    (default: now, in microseconds, so later inputs get larger ids). ``writer_options`` go to
    :func:`write_exactly_once` (``transactional_id_prefix``, ``key_col``, ``producer``...).
    """
    pipeline_id, _prefix = pipeline_identity(pipeline_id, writer_options.get("transactional_id_prefix"))
    if isinstance(run, Mapping):
        run = RunIdentity.from_dict(run, source="write_input_exactly_once", field="run")
    store = ManifestStore.configured(manifest_base_uri, source="manifest_base_uri", access=store_access)
    candidate = int(checkpoint_id) if checkpoint_id is not None else time.time_ns() // 1000
    outcome = claim_input(store, pipeline_id=pipeline_id, input_id=input_id, checkpoint_id=candidate,
                          run=run, reprocess=reprocess, run_is_active=run_is_active,
                          timeout_s=claim_timeout_s)
    if outcome.verdict is InputVerdict.DUPLICATE:
        log.warning("%s", outcome.message)
        return InputCheckpoint(pipeline_id, outcome.input_id, outcome.checkpoint_id, outcome.manifest_uri,
                               False, outcome.message)
    log.info("%s", outcome.message)
    manifest = write_exactly_once(
        df, topic=topic, kafka_config=kafka_config, checkpoint_id=outcome.checkpoint_id,
        manifest_base_uri=store.base_uri, pipeline_id=pipeline_id, prepared_by=run,
        input_record=InputRecord(outcome.input_id, outcome.reprocess_of), store_access=store_access,
        **writer_options,
    )
    return InputCheckpoint(pipeline_id, outcome.input_id, manifest.checkpoint_id, outcome.manifest_uri, True,
                           outcome.message)
