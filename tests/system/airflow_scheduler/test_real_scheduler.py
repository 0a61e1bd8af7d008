"""The example DAGs through a real scheduler, triggerer, dag-processor and API server (not dag.test()).

What a user does in the UI, through the same REST API the UI calls: trigger with a config and no
logical date, watch the cleanup sensor wait in the triggerer, see the pipeline commit its batch
exactly once and the downstream DAG run once for it. Before this issue: the manual pipeline run
failed rendering ``ts_nodash``; the manual cleanup run queued behind the scheduled one for up to
10 minutes; nothing told downstream DAGs about a new batch.

About three minutes on two cores (two spark-submits); the retry that waits for its killed try's
job adds about two (a spark-submit and Airflow's 30 s retry delay); the deadline case adds under a
minute (no Spark: its run fails at once and leaves a PREPARED checkpoint behind).
"""

from __future__ import annotations

import contextlib
import pathlib
import sqlite3
import sys
from datetime import datetime, timezone

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.input_claims import InputClaim, claim_uri, read_claim
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import create_object, read_manifest, write_manifest
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.transactions import produce_transaction, write_prepared_manifest
from kafka_eos_testing.verify import assert_exactly_once, count_keys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "dags"))
from airflow_stack import DEADLINE_FRACTION, PIPELINE_TOPIC, wait_for
from eos_sample_events import write_batch
from txn_helpers import connect_admin

# Airflow's scheduling, deferral and Asset events: one broker proves them (the writer, commit and
# cleanup they drive run on real Kafka in tests/spark, tests/system/faults, tests/sensors, tests/operators
# and tests/system/dags).
pytestmark = [
    pytest.mark.airflow_services, pytest.mark.broker, pytest.mark.timeout(900), pytest.mark.provider_logic
]


def test_a_manual_cleanup_run_starts_beside_a_waiting_scheduled_one_and_its_sensor_fires_in_the_triggerer(
    airflow_stack, kafka_broker, tmp_path
):
    stack = airflow_stack
    stack.unpause("eos_cleanup")  # the scheduler creates the latest scheduled run at once

    def scheduled_sensor_deferred():
        runs = [r for r in stack.runs("eos_cleanup") if r["run_type"] == "scheduled"]
        if not runs:
            return False
        return stack.task_states("eos_cleanup", runs[0]["dag_run_id"]).get("find_lingering") == "deferred"

    wait_for("the scheduled run's sensor to defer", scheduled_sensor_deferred, 240, stack)

    prefix = unique_name("manual-cleanup") + "-"
    run_id = stack.trigger(
        "eos_cleanup",
        {
            "prefixes": [prefix],
            "manifest_base_uri": tmp_path.as_uri(),
            "min_age_seconds": 0,
            "commit_pending_action": "commit",
            "dry_run": False,
        },
    )
    # Starts at once: its sensor pokes, finds nothing yet, and hands the waiting to the triggerer,
    # while the scheduled run's sensor is still waiting too.
    wait_for(
        "the manual run's sensor to defer",
        lambda: stack.task_states("eos_cleanup", run_id).get("find_lingering") == "deferred",
        180,
        stack,
    )
    assert scheduled_sensor_deferred()
    # Not a race this test is about: Airflow's own (apache/airflow#72716, see defer_exit_processed).
    wait_for(
        "the scheduler to take in the manual sensor's defer-exit",
        lambda: stack.defer_exit_processed("eos_cleanup", run_id, "find_lingering"),
        60,
        stack,
    )

    orphan = f"{prefix}0-1"
    topic = unique_name("cleanup-topic")
    produce_transaction(kafka_broker.bootstrap, orphan, topic, [b"o1"], commit=False,
                        transaction_timeout_ms=600_000)

    run = stack.wait_for_run("eos_cleanup", run_id, 240)
    states = stack.task_states("eos_cleanup", run_id)
    sensor_log = stack.task_log("eos_cleanup", run_id, "find_lingering")
    assert run["state"] == "success", (states, sensor_log[-4000:])
    assert states["find_lingering"] == "success" and states["abort_orphans"] == "success"
    # Deferred by the worker, fired by the triggerer, resumed by a worker with the findings.
    deferred, fired = sensor_log.find("Pausing task as DEFERRED"), sensor_log.find("Trigger fired event")
    resumed = sensor_log.find("lingering transactions found: 1 orphan")
    assert 0 <= deferred < fired < resumed, sensor_log[-3000:]
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [])  # the orphan's record never shows


def test_the_pipeline_triggered_without_a_logical_date_commits_once_and_the_downstream_dag_runs_once(
    airflow_stack, kafka_broker
):
    """Then the same batch, triggered again by hand, is skipped however it is triggered.

    Issue: the same batch triggered twice by hand was written twice (the form fills the logical
    date with "now", the CLI and the API give a new run_after: a new checkpoint each time). After the
    first run wrote it (REST, no logical date) and a clear changed nothing, the same batch again
    through the call the UI's trigger form makes (REST, logical date "now"), through the REST API
    without a logical date and through ``airflow dags trigger`` is skipped each time, its log naming
    the run that wrote it, and announced to nobody: still one Asset event, one downstream run.
    """
    stack = airflow_stack
    input_dir = stack.home / "input"
    expected = write_batch(input_dir, "rest-batch", users=50)
    conf = {
        "pipeline_id": unique_name("rest").replace("-", "_"),
        "topic": PIPELINE_TOPIC,
        "input_dir": str(input_dir),
        "manifest_base_uri": (stack.home / "manifests").as_uri(),
        "batch": "rest-batch",
        "spark_partitions": 2,
    }
    stack.unpause("eos_downstream")
    stack.unpause("eos_pipeline")

    run_id = stack.trigger("eos_pipeline", conf)
    run = stack.wait_for_run("eos_pipeline", run_id, 600)
    states = stack.task_states("eos_pipeline", run_id)
    assert run["state"] == "success", (states, stack.log_tails())
    assert run["logical_date"] is None
    assert_exactly_once(count_keys(kafka_broker.bootstrap, PIPELINE_TOPIC), expected)

    downstream = wait_for(
        "the downstream DAG's run", lambda: [r for r in stack.runs("eos_downstream")], 180, stack
    )
    assert [r["run_type"] for r in downstream] == ["asset_triggered"]
    finished = stack.wait_for_run("eos_downstream", downstream[0]["dag_run_id"], 180)
    assert finished["state"] == "success", stack.log_tails()
    xcom = stack.request(
        "GET",
        f"/dags/eos_downstream/dagRuns/{downstream[0]['dag_run_id']}/taskInstances/new_checkpoints"
        "/xcomEntries/return_value",
        params={"deserialize": True},
    )
    [checkpoint] = xcom["value"]
    assert checkpoint["records"] == 50 and checkpoint["pipeline_id"] == conf["pipeline_id"]
    assert checkpoint["uri"] == f"kafka://{kafka_broker.bootstrap.split(',')[0]}/{PIPELINE_TOPIC}"

    # The same run cleared and run again: nothing new is committed, nothing new is announced.
    stack.request(
        "POST",
        "/dags/eos_pipeline/clearTaskInstances",
        json={"dag_run_id": run_id, "dry_run": False, "only_failed": False, "reset_dag_runs": True},
    )
    rerun = stack.wait_for_run("eos_pipeline", run_id, 600)
    assert rerun["state"] == "success", stack.log_tails()
    assert _pipeline_events(stack) == 1
    assert_exactly_once(count_keys(kafka_broker.bootstrap, PIPELINE_TOPIC), expected)
    assert len(stack.runs("eos_downstream")) == 1

    # The same batch triggered again, three ways: skipped, naming the run that wrote it.
    now = datetime.now(timezone.utc).isoformat()  # what the form pre-fills
    form = stack.request("POST", "/dags/eos_pipeline/dagRuns", json={"logical_date": now, "conf": conf})
    rest = stack.trigger("eos_pipeline", conf)
    cli = stack.trigger_with_cli("eos_pipeline", conf)
    for again in (form["dag_run_id"], rest, cli):
        run = stack.wait_for_run("eos_pipeline", again, 300)
        states = stack.task_states("eos_pipeline", again)
        assert (run["state"], states["submit"], states["commit"]) == ("success", "skipped", "skipped"), states
        log = stack.task_log("eos_pipeline", again, "submit")
        assert f"input 'rest-batch' was already written by run '{run_id}'" in log, log[-3000:]
    assert_exactly_once(count_keys(kafka_broker.bootstrap, PIPELINE_TOPIC), expected)
    assert _pipeline_events(stack) == 1
    assert len(stack.runs("eos_downstream")) == 1


def _pipeline_events(stack) -> int:
    """How many Asset events the pipeline DAG has emitted (what downstream DAGs are scheduled on)."""
    return stack.request("GET", "/assets/events", params={"source_dag_id": "eos_pipeline"})["total_entries"]


def test_two_runs_of_one_batch_at_once_write_it_once_taking_over_a_claim_its_dead_run_left(
    airflow_stack, kafka_broker
):
    """Batch C triggered twice at the same moment (the stack runs the example DAG with
    max_active_runs=2), its input claimed by a run that died before preparing anything (here: one
    Airflow no longer knows, as after a deleted run): exactly one run takes the claim over with its
    checkpoint id (after asking Airflow about the dead run) and writes the batch; the other finds the
    claim taken, or loses the compare-and-set when both read the dead run's claim, and is skipped
    (which of the two happened depends on timing; both end the same). A read_committed consumer
    counts every key.
    """
    stack = airflow_stack
    input_dir = stack.home / "input"
    topic = unique_name("dupe-per-user")
    base = {
        "pipeline_id": unique_name("dupe").replace("-", "_"),
        "topic": topic,
        "input_dir": str(input_dir),
        "manifest_base_uri": (stack.home / "manifests").as_uri(),
        "spark_partitions": 2,
        "batch": "batch-c",
    }
    expected = write_batch(input_dir, "batch-c", users=30)
    store = ManifestStore.configured(base["manifest_base_uri"])
    gone = RunIdentity("eos_pipeline", "manual__deleted-run", 1, None)
    assert create_object(claim_uri(store, base["pipeline_id"], "batch-c"),
                         InputClaim("batch-c", base["pipeline_id"], 42, gone, 1).to_json())
    stack.unpause("eos_pipeline")

    together = [stack.trigger("eos_pipeline", base) for _ in range(2)]
    outcomes = {}
    for run_id in together:
        run = stack.wait_for_run("eos_pipeline", run_id, 600)
        assert run["state"] == "success", (stack.task_states("eos_pipeline", run_id), stack.log_tails())
        outcomes[run_id] = stack.task_states("eos_pipeline", run_id)["submit"]
    assert sorted(outcomes.values()) == ["skipped", "success"], outcomes
    [taker] = [run_id for run_id, state in outcomes.items() if state == "success"]
    assert "took checkpoint 42 over from run 'manual__deleted-run'" in stack.task_log("eos_pipeline", taker,
                                                                                      "submit")
    assert read_claim(store, base["pipeline_id"], "batch-c").claimed_by.run_id == taker
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)


def test_a_retry_waits_for_the_spark_job_its_killed_try_left_running(airflow_stack, kafka_broker):
    """Airflow 3.3's task state store, for real: the submit task records its spark-submit; its task
    process is SIGKILLed while the job runs (the job, in a session of its own, is held with SIGSTOP
    so it cannot end first); the retry finds the job in the store and waits for it instead of
    starting a second spark-submit; the job, resumed, prepares the checkpoint, which try 2 returns
    and the commit task commits. Each key once, read_committed."""
    import os
    import signal

    import psutil

    stack = airflow_stack
    input_dir = stack.home / "input"
    pipeline = unique_name("reattach").replace("-", "_")
    conf = {"pipeline_id": pipeline, "topic": unique_name("reattach-per-user"), "input_dir": str(input_dir),
            "manifest_base_uri": (stack.home / "manifests").as_uri(), "batch": "batch-r",
            "spark_partitions": 2}
    expected = write_batch(input_dir, "batch-r", users=30)
    stack.unpause("eos_pipeline")
    run_id = stack.trigger("eos_pipeline", conf)

    def the_job() -> psutil.Process | None:
        """spark-submit of this run: the leader of its own process group (spark-class's launcher and
        the Python driver carry the same arguments, inside that group)."""
        for process in psutil.process_iter(["cmdline"]):
            cmdline = process.info.get("cmdline") or []
            if pipeline not in cmdline or "--pipeline-id" not in cmdline:
                continue
            with contextlib.suppress(ProcessLookupError):
                if os.getpgid(process.pid) == process.pid:
                    return process
        return None

    job = stack.wait("the run's spark-submit", the_job, 300)
    group = job.pid  # the job leads a session of its own (hooks/spark_submit.py)
    os.killpg(group, signal.SIGSTOP)  # held: it cannot finish before the retry looks for it
    try:
        task = job.parent()
        assert task is not None and os.getpgid(task.pid) != group
        task.send_signal(signal.SIGKILL)  # the task's process dies (OOM killer, a killed runner)
        waiting = "waiting for it to end instead of starting the job a second time"
        stack.wait("the retry to find the job left running",
                   lambda: waiting in _log_or_empty(stack, run_id, 2), 300)
        assert job.is_running()
    finally:
        os.killpg(group, signal.SIGCONT)
    run = stack.wait_for_run("eos_pipeline", run_id, 600)
    assert run["state"] == "success", (stack.task_states("eos_pipeline", run_id), stack.log_tails())
    retry_log = stack.task_log("eos_pipeline", run_id, "submit", try_number=2)
    assert f"try 1 left its spark-submit (pid {job.pid}, checkpoint" in retry_log
    assert "Spark-Submit cmd" not in retry_log  # try 2 started no spark-submit of its own
    [(_, manifest)] = list(ManifestStore.configured(conf["manifest_base_uri"]).manifests(pipeline))
    assert manifest.prepared_by.try_number == 1 and manifest.status.value == "COMMITTED"
    assert_exactly_once(count_keys(kafka_broker.bootstrap, conf["topic"]), expected)


def _log_or_empty(stack, run_id: str, try_number: int) -> str:
    """A try's log, or "" while Airflow has none for it yet."""
    try:
        return stack.task_log("eos_pipeline", run_id, "submit", try_number=try_number)
    except Exception:  # 404 until the try has started
        return ""


def test_a_failed_run_that_left_its_checkpoint_prepared_gets_the_deadline_alert_from_the_triggerer(
    airflow_stack, kafka_broker, tmp_path
):
    """The pipeline's transaction deadline (docs/user-guide/airflow-3.md): the scheduler creates it when
    the run is queued (the stack sets 0.02 x the 900 s timeout = 18 s), marks it missed, the triggerer
    runs the provider's callback, which names the run's PREPARED checkpoint and the runbook page.

    The run fails at once (a hand-typed batch with no folder: no Spark); its checkpoint is one the
    test prepares as the job would (a real transaction left open, 120 s transaction timeout, and its
    PREPARED manifest naming the run) and nobody commits. Only a run that *succeeds* before its
    deadline loses it (Airflow prunes it): a failed commit is the case the alert is for.
    """
    stack = airflow_stack
    pipeline, topic = unique_name("deadline").replace("-", "_"), unique_name("deadline-out")
    store = tmp_path.as_uri()
    stack.unpause("eos_pipeline")
    conf = {"pipeline_id": pipeline, "topic": topic, "manifest_base_uri": store,
            "input_dir": str(stack.home / "input"), "batch": "no-such-batch"}
    run_id = stack.trigger("eos_pipeline", conf)
    tid = f"{pipeline}-0-1"
    produce_transaction(kafka_broker.bootstrap, tid, topic, [b"k1"], commit=False,
                        transaction_timeout_ms=120_000)
    with connect_admin(kafka_broker.bootstrap) as admin:
        uri = write_prepared_manifest(admin, store, pipeline, topic, [tid], checkpoint_id=1)
    manifest = read_manifest(uri)
    manifest.prepared_by = RunIdentity("eos_pipeline", run_id, 1)
    write_manifest(uri, manifest)

    run = stack.wait_for_run("eos_pipeline", run_id, 240)
    assert run["state"] == "failed", stack.task_states("eos_pipeline", run_id)
    assert DEADLINE_FRACTION * 900 == 18
    head = f"pipeline {pipeline!r}: run {run_id!r} passed its deadline (0.02 of the 900 s transaction timeout"

    def callback_done() -> tuple[str, str] | None:
        """Airflow's record of this run's deadline callback once it ran: its state and what it returned."""
        with contextlib.closing(sqlite3.connect(f"file:{stack.home / 'airflow.db'}?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT state, output FROM callback WHERE data LIKE ? AND state IN "
                              "('success', 'failed')", (f"%{run_id}%",)).fetchall()
        return rows[0] if rows else None

    state, alert = wait_for("the deadline's callback to run in the triggerer", callback_done, 180, stack)
    assert state == "success" and head in alert, alert
    assert "checkpoint 1 (this run, 1 transaction(s)) is PREPARED and not committed" in alert, alert
    assert "of its 120 s transaction timeout" in alert and f"kafka-eos-txn commit --manifest {uri}" in alert
    assert "kafka-eos-txn runbook commit-pending-transaction" in alert
    # and an operator reads it in the triggerer's log, at ERROR
    log = (stack.home / "triggerer.log").read_text(errors="replace")
    lines = [ln for ln in log.splitlines() if head in ln]
    assert any("error" in ln.split(head)[0].lower() for ln in lines), lines
    assert read_manifest(uri).status.value == "PREPARED"  # the alert changed nothing
