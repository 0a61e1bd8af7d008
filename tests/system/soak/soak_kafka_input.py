"""The soak's second workload (``./run soak --input kafka|both``): Kafka as the pipeline's input.

The example ``eos_kafka_to_kafka`` DAG reads an input topic that :class:`soak_feeder.Feeder`
writes with committed and aborted transactions for the whole run, and writes its own output topic;
its checkpoints live in the same store as the file pipeline's (pipeline id ``soak-k2k``, so its
transactional ids are under the cleanup DAG's ``soak-`` prefix too). The driver keeps one run of
it going (the DAG allows one at a time: a newer checkpoint plans from the last COMMITTED one); the
nemesis hits its tasks and Spark driver as it hits the file pipeline's (the same roles). Each of
the checker's readings judges it with ``soak_checker_kafka_input.py``; after the quiet period one
more run reads whatever the feeder wrote last, and then the input must be read to its end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from soak_checker import read_committed_records, read_manifests, read_output
from soak_checker_kafka_input import group_offsets, judge_kafka_input
from soak_feeder import Feeder
from soak_history import History, read_history

DAG_ID = "eos_kafka_to_kafka"
PIPELINE_ID = "soak-k2k"
INPUT_PARTITIONS = 3
OUTPUT_PARTITIONS = 4


class KafkaInputWorkload:
    """The input and output topics, the DAG's settings, the feeder, the runs and the checks."""

    def __init__(self, seed: int, bootstrap: str, history: History, store: Any) -> None:
        self.input_topic, self.output_topic = f"soak-in-{seed}", f"soak-k2k-out-{seed}"
        self.group = f"soak-k2k-{seed}"
        self.history, self.store = history, store
        self.checker_config = {"bootstrap_servers": bootstrap}
        self.feeder = Feeder({"bootstrap.servers": bootstrap}, self.input_topic, INPUT_PARTITIONS, history,
                             seed=seed + 1)
        self.active: str | None = None
        self.runs = {"success": 0, "failed": 0}

    def create_topics(self, create_topic: Callable[..., None], cluster: Any) -> None:
        create_topic(cluster, self.input_topic, partitions=INPUT_PARTITIONS)
        create_topic(cluster, self.output_topic, partitions=OUTPUT_PARTITIONS)

    def environment(self, connector_jars: tuple[str, ...]) -> dict[str, str]:
        """The example DAG's variables (dags/eos_kafka_to_kafka.py); Spark's Kafka connector from
        the Maven cache, so spark-submit resolves nothing while the nemesis runs."""
        return {"KAFKA_EOS_K2K_PIPELINE_ID": PIPELINE_ID, "KAFKA_EOS_K2K_INPUT_TOPIC": self.input_topic,
                "KAFKA_EOS_K2K_OUTPUT_TOPIC": self.output_topic, "KAFKA_EOS_K2K_GROUP": self.group,
                "KAFKA_EOS_K2K_START": "earliest", "KAFKA_EOS_K2K_SCHEDULE": "none",
                "KAFKA_EOS_K2K_SPARK_JARS": ",".join(connector_jars)}

    def step(self, stack: Any, retrying: Callable[..., Any]) -> None:
        """Record the active run's end, and start the next run when none is active."""
        if self.active is not None:
            try:
                state = stack.run(DAG_ID, self.active)["state"]
            except Exception:  # the api-server is down or frozen: ask at the next tick
                return
            if state not in ("success", "failed"):
                return
            self.runs[state] += 1
            self.history.record("k2k_run", run_id=self.active, state=state)
            self.active = None
        self.active = retrying("trigger", lambda: stack.trigger(DAG_ID, {}))
        self.history.record("k2k_trigger", run_id=self.active)

    def settle(self, stack: Any, deadline_s: float) -> None:
        """After the faults: the active run ends (before the final cleanup run)."""
        if self.active is not None:
            state = stack.wait_for_run(DAG_ID, self.active, deadline_s)["state"]
            self.runs[state] += 1
            self.history.record("k2k_run", run_id=self.active, state=state)
            self.active = None

    def read_to_the_end(self, stack: Any, deadline_s: float) -> list[str]:
        """After the final cleanup run: one more run reads what the feeder wrote last.

        Returns what kept it from the end (nothing when the run succeeded): the verdict is still
        computed, and the PREPARED checkpoint that held the range shows among its *stuck*."""
        run_id = stack.trigger(DAG_ID, {})
        self.history.record("k2k_trigger", run_id=run_id, final=True)
        state = stack.wait_for_run(DAG_ID, run_id, deadline_s)["state"]
        self.runs[state] += 1
        self.history.record("k2k_run", run_id=run_id, state=state, final=True)
        if state != "success":
            return [f"the final {DAG_ID} run {run_id} ended {state}: the input was not read to its end "
                    "(its task logs are in the soak's Airflow home)"]
        return []

    def judge(self, *, final: bool) -> Any:
        """One reading, in the order that keeps it consistent: the history, the manifests, the
        input, then the output (an output record can only come from input read before it)."""
        history = list(read_history(self.history.path))
        manifests = read_manifests(self.store, PIPELINE_ID)
        inputs = read_committed_records(self.checker_config, self.input_topic)
        counts, beyond = read_output(self.checker_config, self.output_topic)
        offsets = group_offsets(self.checker_config, self.group, self.input_topic) if final else None
        return judge_kafka_input(history, manifests, inputs, counts, final=final,
                                 not_yet_visible=() if final else beyond, offsets=offsets)
