"""The randomized fault soak: the example pipeline and cleanup DAGs on a real Airflow, a 3-node
Kafka 4.4 and Spark, under a seeded nemesis, judged by an independent checker (issue 26).

``./run soak --minutes N --seed S`` runs it; the ``soak`` pass of ``./run test`` runs 5 minutes, its
seed the UTC date (printed with the replay command, as is the one-line result CI's log shows).
The driver writes a fresh input batch and triggers ``eos_pipeline`` for it whenever fewer than two
runs (``./run soak --active-runs``) are active, now and then triggers a batch a second time by
hand (it must be written once) and triggers a failed batch again (as an operator would), and
triggers ``eos_cleanup`` every minute.
The nemesis (``soak_nemesis.py``) kills and pauses Kafka nodes, the Airflow scheduler, triggerer,
dag-processor and api-server, task supervisors and task processes (the commit task's among them),
Spark drivers and Spark's Python workers. Every 30 s the checker (``soak_checker.py``) reads the
output topic with read_committed and the manifests as plain JSON and judges the history so far;
at the end, after the nemesis healed everything, every run finished and one cleanup ran, it
judges once more with nothing in flight and checks that nothing is left open.

With ``--input kafka|both`` the Kafka-input pipeline runs too (``soak_kafka_input.py``): an
upstream producer writes its input for the whole run, the driver keeps one ``eos_kafka_to_kafka``
run going, the checker judges it per input record (``soak_checker_kafka_input.py``).

Everything (history, summary, Airflow logs) stays in ``$KAFKA_EOS_SOAK_DIR`` when set.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import psutil
import pytest
from airflow_stack import SERVICES, AirflowStack, free_port, stack_environment, wait_for
from cluster_helpers import create_topic, healthy
from eos_sample_events import write_batch
from soak_asset_events import checkpoints_from_manifests, events_from_rest, judge_events
from soak_checker import (
    S3Manifests,
    count_output,
    judge,
    read_manifests,
    read_output,
    reading,
    stuck,
    writer_lease,
)
from soak_history import History, read_history
from soak_kafka_input import PIPELINE_ID as K2K_PIPELINE_ID
from soak_kafka_input import KafkaInputWorkload
from soak_nemesis import Nemesis, Target, descendants
from soak_operator_actions import SCHEDULE, OperatorActions, downstream_runs, judge_downstream_runs

from kafka_eos_testing.pytest_plugin import KAFKA_KIND_ENV, kafka_kind

pytestmark = pytest.mark.soak

PIPELINE_ID = "soak"
PARTITIONS = 4
CHECK_EVERY_S = 30
CLEANUP_EVERY_S = 60
PYSPARK_WORKERS = ("pyspark.daemon", "pyspark.worker")


# ``./run soak`` options (scripts/soak.py sets every variable) -> the variable the test reads, its
# default (when pytest is run by hand) and the values it takes; the one table the test reads them by.
_OPTIONS = {
    "--active-runs": ("KAFKA_EOS_SOAK_ACTIVE_RUNS", "1", ("1", "2", "3", "4")),
    "--fault-every": ("KAFKA_EOS_SOAK_FAULT_EVERY_S", "4,12", None),
    "--spark": ("KAFKA_EOS_SOAK_SPARK", "local", ("local", "cluster")),
    "--store": ("KAFKA_EOS_SOAK_STORE", "file", ("file", "s3")),
    "--executor": ("KAFKA_EOS_SOAK_EXECUTOR", "local", ("local", "celery")),
    "--input": ("KAFKA_EOS_SOAK_INPUT", "files", ("files", "kafka", "both")),
}


def _option(flag: str) -> str:
    """The value of one ``./run soak`` option; a value it does not take is refused by name."""
    name, default, allowed = _OPTIONS[flag]
    value = os.environ.get(name, default)
    if allowed is not None and value not in allowed:
        raise ValueError(f"{name}={value!r} ({flag}): one of {', '.join(allowed)}")
    return value


def replay_options(env: Mapping[str, str]) -> str:
    """The options a run was started with that are not the defaults, as ``./run soak`` takes them:
    the replay command must rebuild the same deployment, or the seed draws other faults."""
    return "".join(f" {flag} {env[name]}" for flag, (name, default, _) in _OPTIONS.items()
                   if env.get(name, default) != default)


CELERY_WORKERS = ("celery-worker-1", "celery-worker-2")


def _settings() -> tuple[float, int, pathlib.Path | None]:
    minutes = float(os.environ.get("KAFKA_EOS_SOAK_MINUTES", "5"))
    # "local": spark-submit in local mode; "cluster": the standalone cluster (master + 2 workers)
    seed_text = os.environ.get("KAFKA_EOS_SOAK_SEED", "")
    seed = int(seed_text) if seed_text else random.SystemRandom().randrange(2**31)
    out = os.environ.get("KAFKA_EOS_SOAK_DIR")
    return minutes, seed, pathlib.Path(out) if out else None


def _retrying(what: str, call: Callable[[], Any], timeout_s: float = 120) -> Any:
    """A REST call that survives the api-server being killed or paused by the nemesis."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except Exception as err:  # the api-server is down or frozen: ask again until the deadline
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: no answer from Airflow's API in {timeout_s} s: {err}") from err
            time.sleep(1)  # retry interval of a deadline-bounded wait


def _spark_targets(spark: Any) -> list[Target]:
    """The standalone cluster's executors (Spark reschedules their tasks) and workers (restarted)."""

    def executors() -> list[psutil.Process]:
        return [psutil.Process(pid) for pid in spark.executor_pids()]

    def workers() -> list[psutil.Process]:
        found = []
        for index in range(len(spark._workers)):
            try:
                found.append(psutil.Process(spark.worker_pid(index)))
            except (RuntimeError, psutil.NoSuchProcess):
                continue
        return found

    def restart_worker(_: psutil.Process) -> None:
        spark.ensure_workers()

    return [Target("spark-executor", executors), Target("spark-worker", workers, restart_worker)]


def _targets(cluster: Any, stack: AirflowStack) -> list[Target]:
    def service(name: str) -> Target:
        def processes() -> list[psutil.Process]:
            process = stack.processes.get(name)
            return [psutil.Process(process.pid)] if process is not None and process.poll() is None else []

        def restart(_: psutil.Process) -> None:
            stack.start_service(name)

        return Target(f"airflow-{name}", processes, restart, group=True)

    def kafka_processes() -> list[psutil.Process]:
        return [psutil.Process(n.process.pid) for n in cluster.nodes if n.running()]

    def kafka_restart(process: psutil.Process) -> None:
        for node in cluster.nodes:
            if node.process is not None and node.process.pid == process.pid:
                cluster.start_node(node.node_id)

    def under_executor(match: Callable[[str], bool]) -> Callable[[], list[psutil.Process]]:
        """Tasks and what they start, under the executor: the scheduler's children with the
        LocalExecutor, the Celery workers' with ``--executor celery``."""
        def processes() -> list[psutil.Process]:
            found = []
            for name in ("scheduler", *CELERY_WORKERS):
                process = stack.processes.get(name)
                if process is not None:
                    found += descendants(process.pid, lambda p: match(" ".join(p.cmdline())))
            return found

        return processes

    def task_runner(line: str) -> bool:
        """A task's own process, "airflow worker -- <task instance id>" (not "-- LocalExecutor: ...")."""
        return line.startswith("airflow worker -- ") and "Executor" not in line

    def commit_tasks() -> list[psutil.Process]:
        return [p for p in under_executor(task_runner)() if "commit" in " ".join(p.parent().cmdline())]

    return [
        Target("kafka-node", kafka_processes, kafka_restart, kafka_node=True),
        service("scheduler"), service("triggerer"), service("dag-processor"), service("api-server"),
        Target("airflow-supervisor", under_executor(lambda c: c.startswith("airflow supervisor:"))),
        # LocalExecutor's workers are paused, not killed: an idle one waits for work inside the
        # lock of the executor's multiprocessing queue, and a SIGKILL leaves that lock held, so
        # every other worker blocks on it and queued tasks never start until the scheduler (and
        # with it the executor) restarts (soak pass of 2026-11-27: two commits queued 7 minutes
        # into the quiet period). An Airflow limitation, in the runbook for operators
        # (troubleshooting.md); a worker still dies with the scheduler (its kill is the group's).
        Target("airflow-executor-worker", under_executor(lambda c: c.startswith("airflow worker -- Local")),
               actions=("pause",)),
        Target("airflow-task", under_executor(task_runner)),
        Target("commit-task", commit_tasks),
        Target("spark-driver", under_executor(lambda c: "org.apache.spark.deploy.SparkSubmit" in c)),
        Target("spark-python-worker", under_executor(lambda c: any(m in c for m in PYSPARK_WORKERS))),
    ]


def _s3_connections(kafka_eos_conn: str, store_uri: str, s3: Any) -> dict[str, str]:
    """The store on S3 as a platform team configures it: the kafka_eos connection names the store
    and an ``aws`` connection that holds its credentials (no AWS_* variable in any service)."""
    from kafka_eos_testing import s3_server

    kafka_eos = json.loads(kafka_eos_conn)
    kafka_eos["extra"].update({"manifest_base_uri": store_uri, "manifest_store_conn_id": "soak_store"})
    aws = {"conn_type": "aws", "login": s3_server.ACCESS_KEY, "password": s3_server.SECRET_KEY,
           "extra": {"endpoint_url": s3.endpoint, "region_name": s3_server.REGION}}
    return {"AIRFLOW_CONN_KAFKA_EOS_DEFAULT": json.dumps(kafka_eos),
            "AIRFLOW_CONN_SOAK_STORE": json.dumps(aws)}


def _celery_targets(stack: AirflowStack, redis: Any) -> list[Target]:
    """A Celery worker (killed with its tasks, as a host that dies, and started again; or paused),
    and Redis, the broker (paused only: it keeps the queue in memory, and a broker that loses its
    queue leaves queued tasks to Airflow's 10-minute task_queued_timeout, longer than a short soak)."""
    def workers() -> list[psutil.Process]:
        return [psutil.Process(p.pid) for name in CELERY_WORKERS
                if (p := stack.processes.get(name)) is not None and p.poll() is None]

    def restart(process: psutil.Process) -> None:
        for name in CELERY_WORKERS:
            if (p := stack.processes.get(name)) is not None and p.pid == process.pid:
                stack.start_service(name)

    def broker() -> list[psutil.Process]:
        return [psutil.Process(redis.process.pid)] if redis.process.poll() is None else []

    return [Target("airflow-celery-worker", workers, restart, group=True),
            Target("redis", broker, actions=("pause",))]


def _s3_target(s3: Any) -> Target:
    """The S3-API server, paused only: moto keeps its objects in memory, so a kill would lose the
    store, which a real object store does not do; a pause is a store that stops answering."""
    def processes() -> list[psutil.Process]:
        return [psutil.Process(s3.process.pid)] if s3.process.poll() is None else []

    return Target("s3-store", processes, actions=("pause",))


def _write_batch(input_dir: pathlib.Path, batch: str, users: int) -> list[str]:
    return sorted(write_batch(input_dir, batch, users=users))


def test_exactly_once_holds_under_a_seeded_nemesis(tmp_path_factory):
    if kafka_kind() != "apache3":
        pytest.skip(f"the soak needs a 3-node Apache Kafka cluster whose nodes it can kill "
                    f"(${KAFKA_KIND_ENV}=apache3; the kafka under test is {kafka_kind()})")
    from kafka_eos_testing.apache_kafka import ApacheKafkaCluster

    minutes, seed, out = _settings()
    out = out or tmp_path_factory.mktemp("soak")
    out.mkdir(parents=True, exist_ok=True)
    print(f"soak: {minutes} min, seed {seed}, output in {out}")
    rng = random.Random(seed)
    started = time.monotonic()
    home = out / "airflow"
    (home / "manifests").mkdir(parents=True, exist_ok=True)
    port = free_port()
    # Airflow's database is made while the Kafka nodes start (it needs no Kafka): start-up is
    # what a CI pass pays for, and these two are its longest parts.
    migrate = _migrate(home, stack_environment(home, port, {}))
    cluster = stack = spark = nemesis = s3 = redis = kafka_input = None
    history = History(out / "history.jsonl")
    try:
        store: pathlib.Path | S3Manifests = home / "manifests"
        store_uri = (home / "manifests").as_uri()
        if _option("--store") == "s3":
            from kafka_eos_testing import s3_server

            s3 = s3_server.S3Server(log_path=out / "s3-server.log")
            store_uri = s3.create_bucket(f"soak-{seed}") + "/manifests"
            store = S3Manifests(s3.endpoint, f"soak-{seed}", "manifests", s3_server.ACCESS_KEY,
                                s3_server.SECRET_KEY, s3_server.REGION)
        cluster = ApacheKafkaCluster({"nodes": 3, "data_dir": str(out / "kafka")})
        topic = f"soak-out-{seed}"
        create_topic(cluster, topic, partitions=PARTITIONS)
        env = stack_environment(home, port, cluster.client_config())
        if _option("--input") != "files":
            if _option("--spark") == "cluster":
                raise ValueError("--input kafka|both runs with --spark local only: the example "
                                 "eos_kafka_to_kafka DAG takes no Spark settings for the standalone cluster")
            from kafka_input_support import connector_jars

            kafka_input = KafkaInputWorkload(seed, cluster.bootstrap, history, store)
            kafka_input.create_topics(create_topic, cluster)
            env.update(kafka_input.environment(connector_jars()))
        env.update({
            "KAFKA_EOS_PIPELINE_ID": PIPELINE_ID,
            "KAFKA_EOS_PIPELINE_TOPIC": topic,
            # The topic's Asset the DAGs declare names the connection's first server: so the
            # commit task's event is the declared Asset's, with its partition key (issue 39).
            "KAFKA_EOS_PIPELINE_BOOTSTRAP_SERVERS": cluster.client_config()["bootstrap.servers"],
            "KAFKA_EOS_PIPELINE_SCHEDULE": SCHEDULE,  # backfills need one (soak_operator_actions.py)
            "KAFKA_EOS_PIPELINE_INPUT_DIR": str(home / "input"),
            "KAFKA_EOS_PIPELINE_MAX_ACTIVE_RUNS": _option("--active-runs"),
            "KAFKA_EOS_MANIFEST_BASE_URI": store_uri,
            "KAFKA_EOS_CLEANUP_PREFIXES": f"{PIPELINE_ID}-",
            "KAFKA_EOS_CLEANUP_MIN_AGE_SECONDS": "60",
            "KAFKA_EOS_CLEANUP_POLL_SECONDS": "5",
            # Nothing lingering: skip after 20 s. A cleanup run starts every minute and its first
            # poke finds whatever is older than min_age by then; the final run (min_age 0) finds
            # all there is at its first poke, and waits these 20 s only when nothing is left.
            "KAFKA_EOS_CLEANUP_SENSOR_TIMEOUT_SECONDS": "20",
            # a killed task is noticed in 30 s (default 5 min), so its retry fits in a short soak
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
            # A killed scheduler's queued and running tasks are reset by the next scheduler's orphan
            # check, every 5 min by default: each scheduler kill stalled the runs in flight that long
            # (the first long soak: 3 runs stuck 20:24:45-20:29:53, "Reset the following 3 orphaned
            # TaskInstances"). Every 30 s, as the heartbeat timeout above.
            "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "30",
        })
        if s3 is not None:
            # The credentials live in the connection only: no service inherits an AWS_* variable
            # (this machine sets AWS_CA_BUNDLE, for one), so a path that skipped the connection
            # could not find the store through the default chain by accident.
            for name in [k for k in env if k.startswith("AWS_")]:
                del env[name]
            env.update(_s3_connections(env["AIRFLOW_CONN_KAFKA_EOS_DEFAULT"], store_uri, s3))
        if _option("--executor") == "celery":
            from kafka_eos_testing.celery_deployment import RedisServer

            redis = RedisServer(out / "redis")
            env.update({"AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                        "AIRFLOW__CELERY__BROKER_URL": f"{redis.url}/0",
                        "AIRFLOW__CELERY__RESULT_BACKEND": f"{redis.url}/1",
                        "AIRFLOW__CELERY__SYNC_PARALLELISM": "1"})
        if _option("--spark") == "cluster":
            from kafka_eos_testing.spark_cluster import start_cluster

            spark = start_cluster(workers=2, work_dir=out / "spark")
            host, spark_port = spark.master_url.removeprefix("spark://").rsplit(":", 1)
            env["AIRFLOW_CONN_SPARK_SOAK"] = json.dumps({"conn_type": "spark", "host": f"spark://{host}",
                                                         "port": int(spark_port),
                                                         "extra": {"deploy-mode": "client"}})
            env["KAFKA_EOS_PIPELINE_SPARK_CONN_ID"] = "spark_soak"
        if spark is not None:
            env["KAFKA_EOS_PIPELINE_SPARK_CONF"] = json.dumps(spark.submit_conf())
        # In local mode the driver JVM is the quick one already (SPARK_SUBMIT_OPTS, tests/conftest.py):
        # a soak batch is a job of seconds spent in start-up, and the two cores are the soak's bound.
        stack = AirflowStack(home, env, port)
        _migrated(migrate, home)
        services = list(SERVICES)
        if redis is not None:
            for name in CELERY_WORKERS:
                stack.commands[name] = ["celery", "worker", "--concurrency", "2", "--celery-hostname",
                                        f"{name}@%h", "--skip-serve-logs", "--without-mingle",
                                        "--without-gossip"]
            services += CELERY_WORKERS
        for name in services:
            stack.start_service(name)
        wait_for("the API server", lambda: stack.request("GET", "/monitor/health"), 240, stack)
        stack.unpause("eos_pipeline")
        stack.unpause("eos_cleanup")
        stack.unpause("eos_downstream")  # one run per committed batch, on the topic's partitioned Asset
        if kafka_input is not None:
            stack.unpause("eos_kafka_to_kafka")
        checker_config = {"bootstrap_servers": cluster.bootstrap}
        low, high = (float(x) for x in _option("--fault-every").split(","))
        targets = _targets(cluster, stack) + (_spark_targets(spark) if spark is not None else [])
        if s3 is not None:
            targets.append(_s3_target(s3))
        if redis is not None:
            targets += _celery_targets(stack, redis)
        nemesis = Nemesis(seed, targets, history, interval_s=(low, high))
        startup_s = time.monotonic() - started
        history.record("phase", name="start", seed=seed, minutes=minutes, topic=topic, startup_s=startup_s)
        nemesis.start()
        if kafka_input is not None:
            kafka_input.feeder.start()
        active = _drive(stack, history, rng, home, store, minutes, checker_config, topic, kafka_input)
        if kafka_input is not None:
            kafka_input.feeder.stop()
        nemesis.stop()
        quiet_started = time.monotonic()
        history.record("phase", name="quiet", faults=nemesis.faults, kinds=sorted(nemesis.kinds))
        if spark is not None:
            spark.ensure_workers()
        files_left, kafka_left = _quiet(stack, history, cluster, active, kafka_input, store)
        manifests = read_manifests(store, PIPELINE_ID)
        counts = reading("the final reading", lambda: count_output(checker_config, topic))
        verdict = judge(read_history(out / "history.jsonl"), manifests, counts, final=True)
        verdict.stuck = files_left + reading("the final reading", lambda: stuck(
            checker_config, topic, f"{PIPELINE_ID}-", manifests))
        extra: dict[str, Any] = {}
        if kafka_input is not None:
            k2k = reading("the final Kafka-input reading", lambda: kafka_input.judge(final=True))
            k2k.stuck += kafka_left
            k2k.stuck += reading("the final Kafka-input reading", lambda: stuck(
                checker_config, kafka_input.output_topic, f"{K2K_PIPELINE_ID}-",
                read_manifests(store, K2K_PIPELINE_ID)))
            k2k.stuck += reading("the final Kafka-input reading", lambda: stuck(
                checker_config, kafka_input.input_topic, kafka_input.feeder.transactional_id, []))
            extra["kafka_input"] = {**k2k.summary(), "runs": kafka_input.runs,
                                    "input_transactions": kafka_input.feeder.written}
        # One Asset event per committed checkpoint, with its batch as partition key (issue 39).
        # The cleanup DAG announces what it commits for runs that ended before their commit.
        by_cleanup = _retrying("the cleanup's Asset events", lambda: events_from_rest(stack, "eos_cleanup"))
        asset_events = {"files": judge_events(
            _retrying("the pipeline's Asset events", lambda: events_from_rest(stack, "eos_pipeline"))
            + by_cleanup, checkpoints_from_manifests(manifests), PIPELINE_ID, keyed=True)}
        if kafka_input is not None:
            asset_events["kafka"] = judge_events(
                _retrying("the Kafka-input pipeline's Asset events",
                          lambda: events_from_rest(stack, "eos_kafka_to_kafka")) + by_cleanup,
                checkpoints_from_manifests(read_manifests(store, K2K_PIPELINE_ID)), K2K_PIPELINE_ID,
                keyed=True)
        extra["asset_events"] = asset_events
        if _option("--input") != "kafka":  # eos_downstream: one run per committed batch (issue 39)
            extra["downstream"] = _downstream_verdict(stack, checkpoints_from_manifests(manifests))
        history_now = list(read_history(out / "history.jsonl"))
        checks = [e for e in history_now if e["kind"] == "check"]
        extra["triggers"] = dict(sorted(Counter(
            e["why"] for e in history_now if e["kind"] == "trigger").items()))
        summary = {
            "seed": seed, "minutes": minutes, "options": replay_options(os.environ),
            "faults": nemesis.faults, "fault_kinds": sorted(nemesis.kinds),
            "faults_by_kind": dict(sorted(nemesis.by_kind.items())),
            "checkpoints": dict(sorted(Counter(m["status"] for m in manifests).items())),
            "checks_during_run": len(checks),
            "failed_checks_during_run": sum(1 for c in checks if not c["ok"]),
            "startup_s": round(startup_s), "quiet_and_checks_s": round(time.monotonic() - quiet_started),
            **verdict.summary(), **extra,
        }
        history.record("phase", name="end", **summary)
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        print(json.dumps(summary, indent=2))
        # Each workload that ran committed something, and a fault happened: else it proved nothing.
        progressed = nemesis.faults > 0 and all(
            part["committed_checkpoints"] > 0 for part in _workloads(summary).values())
        all_ok = all(part["ok"] for part in [*_workloads(summary).values(), *asset_events.values(),
                                             *([summary["downstream"]] if "downstream" in summary else [])])
        print(result_line(summary, ok=all_ok and summary["failed_checks_during_run"] == 0 and progressed))
        assert all_ok and summary["failed_checks_during_run"] == 0, summary
        assert progressed, summary
    finally:
        if nemesis is not None:
            nemesis.halt()
        if kafka_input is not None:
            kafka_input.feeder.halt()
        history.close()
        if migrate.poll() is None:
            migrate.kill()
            migrate.wait(timeout=30)
        if stack is not None:
            stack.stop()
        if spark is not None:
            spark.stop()
        if cluster is not None:
            cluster.stop()
        if s3 is not None:
            s3.stop()
        if redis is not None:
            redis.stop()


def _downstream_verdict(stack: AirflowStack, checkpoints: Mapping[int, Any], wait_s: float = 120) -> dict:
    """eos_downstream's runs against the committed batches. The scheduler makes a run shortly after
    the event that owes it: asked again (for ``wait_s`` at most) while one is missing, then judged."""
    deadline = time.monotonic() + wait_s
    while True:
        verdict = judge_downstream_runs(_retrying("eos_downstream's runs", lambda: downstream_runs(stack)),
                                        checkpoints)
        if not verdict["missing"] or time.monotonic() >= deadline:
            return verdict
        time.sleep(2)  # polling interval of a deadline-bounded wait


def _anomalies(verdict: Mapping[str, Any]) -> str:
    return ", ".join(f"{name.replace('_', ' ')} {verdict[name]}" for name in
                     ("lost", "duplicated", "aborted_reads", "double_commits", "unexpected", "stuck"))


def result_line(summary: dict[str, Any], *, ok: bool) -> str:
    """One line for CI's log: the verdict, the counts, and how to replay the run."""
    checkpoints = ", ".join(f"{n} {status}" for status, n in summary["checkpoints"].items()) or "none"
    faults = ", ".join(f"{kind} {n}" for kind, n in summary["faults_by_kind"].items()) or "none"
    kafka = summary.get("kafka_input")
    if kafka is not None:
        written = ", ".join(f"{n} {outcome}" for outcome, n in kafka["input_transactions"].items())
        checkpoints += (f"; Kafka input: {kafka['committed_checkpoints']} COMMITTED of "
                        f"{sum(kafka['runs'].values())} runs, {kafka['keys_checked']} input records "
                        f"(transactions: {written}), {_anomalies(kafka)}")
    events = summary.get("asset_events", {})
    checkpoints += "".join(
        f"; Asset events ({name}): {v['events']} for {v['owed']} owed, {v['with_partition_key']} keyed, "
        f"duplicated {len(v['duplicated'])}, missing {len(v['missing'])}, unexpected {len(v['unexpected'])}"
        for name, v in events.items())
    if "downstream" in summary:
        d = summary["downstream"]
        checkpoints += (f"; eos_downstream: {d['runs']} runs for {d['owed']} committed batches, "
                        f"duplicated {len(d['duplicated'])}, missing {len(d['missing'])}, "
                        f"unexpected {len(d['unexpected'])}")
    if summary.get("triggers"):
        checkpoints += f"; triggers: {', '.join(f'{why} {n}' for why, n in summary['triggers'].items())}"
    return (f"soak result: {'OK' if ok else 'FAILED'}, seed {summary['seed']}, {summary['minutes']:g} min; "
            f"checkpoints: {checkpoints}; {summary['faults']} faults of {len(summary['faults_by_kind'])} "
            f"kinds ({faults}); {_anomalies(summary)}; checks during the run {summary['checks_during_run']} "
            f"({summary['failed_checks_during_run']} failed); start-up {summary['startup_s']} s, quiet "
            f"period and final checks {summary['quiet_and_checks_s']} s; replay: ./run soak --minutes "
            f"{summary['minutes']:g} --seed {summary['seed']}{summary.get('options', '')}")


def _migrate(home: pathlib.Path, env: dict[str, str]) -> subprocess.Popen:
    """``airflow db migrate``, started now (its output in ``home/db-migrate.log``)."""
    with open(home / "db-migrate.log", "wb") as log:
        return subprocess.Popen([sys.executable, "-m", "airflow", "db", "migrate"], env=env, cwd=home,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _migrated(migrate: subprocess.Popen, home: pathlib.Path, timeout_s: float = 300) -> None:
    try:
        code = migrate.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"airflow db migrate did not finish in {timeout_s} s; its log: "
                             f"{home / 'db-migrate.log'}") from None
    if code != 0:
        tail = (home / "db-migrate.log").read_text(errors="replace")[-3000:]
        raise AssertionError(f"airflow db migrate exited {code}:\n{tail}")


def _workloads(summary: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The verdict of each workload that ran (``--input``): the file pipeline's is the summary's
    top level (as before there was a second one), the Kafka-input pipeline's its ``kafka_input``."""
    found: dict[str, Mapping[str, Any]] = {}
    if _option("--input") != "kafka":
        found["files"] = summary
    if "kafka_input" in summary:
        found["kafka"] = summary["kafka_input"]
    return found


def _drive(stack: AirflowStack, history: History, rng: random.Random, home: pathlib.Path,
           store: pathlib.Path | S3Manifests, minutes: float, checker_config: dict[str, Any],
           topic: str, kafka_input: KafkaInputWorkload | None) -> dict[str, str]:
    """Trigger batches (and keep a Kafka-input run going) until the time is up; returns the file
    pipeline's runs still active."""
    active: dict[str, str] = {}
    batches: list[str] = []
    retried: set[str] = set()
    started = time.monotonic()
    next_check, next_cleanup = started + CHECK_EVERY_S, started + CLEANUP_EVERY_S

    seen: dict[int, tuple[str, str | None]] = {}
    max_active = int(_option("--active-runs")) if _option("--input") != "kafka" else 0
    actions = OperatorActions(stack, history, rng,
                              lambda batch: _write_batch(home / "input", batch, users=rng.randint(20, 60)),
                              _retrying)

    def record_transitions() -> None:
        """Every manifest state or decision not seen before goes into the history (the store's log)."""
        for manifest in read_manifests(store, PIPELINE_ID):
            decision = (manifest.get("decision") or {}).get("outcome")
            state = (manifest["status"], decision)
            if seen.get(manifest["checkpoint_id"]) != state:
                seen[manifest["checkpoint_id"]] = state
                history.record("manifest", checkpoint=manifest["checkpoint_id"], status=state[0],
                               decision=decision, input=(manifest.get("input") or {}).get("id"),
                               transactions=[c["transactional_id"] for c in manifest["committables"]])

    def trigger(batch: str, why: str) -> None:
        run_id = _retrying("trigger", lambda: stack.trigger("eos_pipeline", {"batch": batch}))
        active[run_id] = batch
        history.record("trigger", batch=batch, run_id=run_id, why=why)

    while time.monotonic() < started + minutes * 60:
        _collect_finished(stack, history, active, retried, trigger, actions.finished)
        record_transitions()
        if kafka_input is not None:
            kafka_input.step(stack, _retrying)
        if len(active) < max_active and not actions.step(active):
            if batches and rng.random() < 0.1:
                trigger(rng.choice(batches[-5:]), "again by hand")  # must be skipped: written once
            else:
                batch = f"b{len(batches) + 1:05d}"
                keys = _write_batch(home / "input", batch, users=rng.randint(20, 60))
                history.record("batch", batch=batch, keys=keys)
                batches.append(batch)
                trigger(batch, "new")
        now = time.monotonic()
        if now >= next_check:
            next_check = now + CHECK_EVERY_S

            def take_check() -> dict[str, Any]:
                counts, beyond_stable = read_output(checker_config, topic)
                verdict = judge(read_history(history.path), read_manifests(store, PIPELINE_ID),
                                counts, final=False, not_yet_visible=beyond_stable)
                check = verdict.summary()
                if kafka_input is not None:
                    k2k = kafka_input.judge(final=False).summary()
                    check.update(ok=check["ok"] and k2k["ok"], kafka_input=k2k)
                return check

            history.record("check", **reading("a check during the run", take_check))
        if now >= next_cleanup:
            next_cleanup = now + CLEANUP_EVERY_S
            run_id = _retrying("cleanup", lambda: stack.trigger("eos_cleanup", {}))
            history.record("cleanup", run_id=run_id)
        time.sleep(1)  # the driver's pacing tick, not a synchronisation
    history.record("operator_actions", **actions.done)
    return active


def _collect_finished(stack: AirflowStack, history: History, active: dict[str, str], retried: set[str],
                      trigger: Callable[[str, str], None] | None,
                      ended: Callable[[str, str], None] | None = None) -> None:
    for run_id, batch in list(active.items()):
        try:
            state = stack.run("eos_pipeline", run_id)["state"]
        except Exception:  # the api-server is down or frozen: ask at the next tick
            return
        if state in ("success", "failed"):
            del active[run_id]
            history.record("run", run_id=run_id, batch=batch, state=state)
            if ended is not None:
                ended(run_id, batch)
            if state == "failed" and trigger is not None and batch not in retried:
                retried.add(batch)
                trigger(batch, "failed run triggered again")


def _writers_gone(store: pathlib.Path | S3Manifests, pipelines: list[str], history: History,
                  timeout_s: float = 150.0) -> None:
    """Wait (bounded) until no pipeline has a live writer lease. A Spark driver the nemesis killed
    leaves its lease until it expires (60 s after its last renewal), and the cleanup leaves the
    prefix of a live writer alone, as an operator's would: the final cleanup runs after that."""
    deadline = time.monotonic() + timeout_s
    while True:
        live = [p for p in pipelines if (lease := writer_lease(store, p)) is not None
                and lease["expires_at_ms"] > time.time() * 1000]
        if not live or time.monotonic() >= deadline:
            history.record("writers", live=live)
            return
        time.sleep(2)  # polling interval of a deadline-bounded wait


def _quiet(stack: AirflowStack, history: History, cluster: Any, active: dict[str, str],
           kafka_input: KafkaInputWorkload | None,
           store: pathlib.Path | S3Manifests) -> tuple[list[str], list[str]]:
    """Heal, let every run finish, then one cleanup run with nothing left in flight (and then one
    Kafka-input run that reads the input to its end).

    Returns what did not end well, for each workload (the file pipeline's, the Kafka input's):
    a final run that failed is a finding of the verdict (*stuck*, beside the checkpoint that holds
    it), not a reason to skip the verdict (issue 35: a failed final run used to end the soak
    before its checks, so the record said FAILED without saying what was left)."""
    healthy(cluster)
    for name, process in list(stack.processes.items()):
        if process.poll() is not None:
            stack.start_service(name)
    files_left: list[str] = []
    kafka_left: list[str] = []
    deadline = time.monotonic() + 15 * 60
    while active:
        if time.monotonic() >= deadline:
            files_left.append(f"runs still active 15 min after the faults stopped: {active}")
            break
        _collect_finished(stack, history, active, set(), None)
        time.sleep(2)  # polling interval of a deadline-bounded wait
    if kafka_input is not None:
        kafka_input.settle(stack, max(60.0, deadline - time.monotonic()))
    _writers_gone(store, [PIPELINE_ID] + ([K2K_PIPELINE_ID] if kafka_input is not None else []), history)
    run_id = _retrying("cleanup", lambda: stack.trigger("eos_cleanup", {"min_age_seconds": 0}))
    history.record("cleanup", run_id=run_id, final=True)
    finished = stack.wait_for_run("eos_cleanup", run_id, 600)
    history.record("cleanup_end", run_id=run_id, state=finished["state"])
    if finished["state"] != "success":
        files_left.append(f"the final eos_cleanup run {run_id} ended {finished['state']} (its task logs "
                          "are in the soak's Airflow home)")
    if kafka_input is not None:
        kafka_left += kafka_input.read_to_the_end(stack, 600)
    return files_left, kafka_left
