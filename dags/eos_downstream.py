"""Example downstream DAG: runs once per checkpoint the example pipeline commits (copy and adapt).

Data-aware scheduling on the output topic. The pipeline's commit task emits one Asset event for
``kafka://<bootstrap host:port>/<topic>`` (the name OpenLineage gives the topic) each time it
makes a checkpoint visible to ``read_committed`` consumers, and none when a rerun or retry commits
nothing new; so this DAG runs once per new batch, never twice for the same one. The event's
``extra`` says which checkpoint it was and how many records it holds.

On Airflow >= 3.2 the event carries ``partition_key`` = the batch's input identity (the pipeline's
commit task declares the topic's Asset; docs/user-guide.md, "Asset partitions"), and this DAG is on a
``PartitionedAssetTimetable``: one run per committed batch, whose ``dag_run.partition_key`` names
the batch. On Airflow 3.1 it is scheduled on the Asset as before (a run may then collect several
events that arrived while it was queued).

Set ``KAFKA_EOS_PIPELINE_BOOTSTRAP_SERVERS`` (the pipeline connection's ``bootstrap.servers``;
only the first server names the Asset) and ``KAFKA_EOS_PIPELINE_TOPIC`` as for the pipeline.
"""

from __future__ import annotations

import os
from typing import Any

import pendulum
from airflow.sdk import Asset, dag, task

from airflow_provider_kafka_eos.assets.lineage import kafka_asset_uri
from airflow_provider_kafka_eos.tasks.airflow_features import has

BOOTSTRAP_SERVERS = os.environ.get("KAFKA_EOS_PIPELINE_BOOTSTRAP_SERVERS", "broker:9092")
TOPIC = os.environ.get("KAFKA_EOS_PIPELINE_TOPIC", "user-activity-per-user")
OUTPUT_TOPIC = Asset(kafka_asset_uri(BOOTSTRAP_SERVERS, TOPIC))


def _schedule() -> Any:
    """One run per partition (committed batch) where Airflow has partitions, else per Asset event."""
    if has("partitioned_asset_events"):
        from airflow.sdk import PartitionedAssetTimetable

        return PartitionedAssetTimetable(assets=OUTPUT_TOPIC)
    return [OUTPUT_TOPIC]


@dag(
    dag_id="eos_downstream",
    schedule=_schedule(),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["kafka-eos", "example"],
    doc_md=__doc__,
)
def eos_downstream() -> None:
    @task
    def new_checkpoints(triggering_asset_events: Any = None, dag_run: Any = None) -> list[dict[str, Any]]:
        """The checkpoints that triggered this run (one per run when partitioned)."""
        seen = []
        batch = getattr(dag_run, "partition_key", None)  # the committed batch's input identity (>= 3.2)
        # Indexed by the Asset: the same events are also listed under the alias they came through.
        for event in (triggering_asset_events or {}).get(OUTPUT_TOPIC, []):
            extra = dict(event.extra or {})
            print(
                f"{OUTPUT_TOPIC.uri}: checkpoint {extra.get('checkpoint_id')} of {extra.get('pipeline_id')} "
                f"(batch {extra.get('partition_key') or batch!r}), {extra.get('records')} record(s) now "
                "visible to read_committed consumers"
            )
            seen.append({"uri": OUTPUT_TOPIC.uri, **extra})
        return seen

    new_checkpoints()


eos_downstream()
