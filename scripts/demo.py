"""``./run demo``: the example pipeline DAG end to end on the embedded Kafka broker.

``./run demo --kafka apache`` runs the same on a real Apache Kafka 4.4 single node instead
(``kafka_eos_testing/apache_kafka``; its jars are fetched with Maven on first use), and
``--security sasl_ssl`` / ``--security mtls`` makes that node a secured one (certificates made for
the run under ``demo-output/broker/tls``): SASL_SSL with SCRAM-SHA-512, or TLS with client
certificates. The connection then carries the credentials (or the client certificate and key),
as a platform team's would; the Spark tasks get them only through the job's private hand-off.

What it does, all under ``demo-output/`` (recreated on every run):

1. starts ``kafka-eos-devbroker`` (or the Kafka node) with its data in ``demo-output/broker``;
2. points Airflow at ``demo-output/airflow`` (SQLite, migrated) and ``dags/``, and defines the
   connections ``kafka_eos_default`` and ``spark_local`` through ``AIRFLOW_CONN_*`` variables;
3. writes three batches of JSON user-activity events (``demo-output/input/<batch>``);
4. runs ``dags/eos_pipeline.py`` with ``dag.test()`` once per batch (one checkpoint each).
   The second run has a fault injected: a Spark task dies after writing part of its records;
   Spark retries it, the retry fences the dead attempt's transaction. Then the second batch
   is triggered again as a person at the trigger form would (a new run, logical date "now",
   the batch named in the run's conf): the batch is the run's input identity and a COMMITTED
   checkpoint already holds it, so submit and commit skip and nothing is written twice;
5. reads the output topic with a ``read_committed`` consumer and prints the exactly-once
   report: records expected, seen, duplicates, missing. Exit status 1 if it is not exactly once.

``--spark connect`` runs the submit task as ``SparkEosConnectOperator`` on a local Spark Connect
server (``kafka_eos_testing/spark_connect.py``, started once for the demo, its log in
``demo-output/spark-connect.log``) instead of one spark-submit per run; the fault of step 4 is not
injected there (the operator takes no fault plan; ``tests/system/conformance/test_conformance.py``
kills a task on Connect).

``--pipeline kafka-to-kafka`` runs ``dags/eos_kafka_to_kafka.py`` instead (Kafka input, two
checkpoints, aborted input transactions, the consumer group's offsets checked):
``scripts/demo_kafka_to_kafka.py``, on either Kafka (``--kafka apache`` too); plaintext only
(``--security`` is refused with it: Spark's Kafka source cannot take the secured modes' credentials).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "demo-output"
PIPELINE_ID = "user_activity_demo"
TOPIC = "user-activity-per-user"
BATCHES = ["20260301T100000", "20260301T110000", "20260301T120000"]
FAULTY_BATCH = BATCHES[1]
FAULT = "kill_task_after_records=25"


def say(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def prepare_environment(bootstrap: str, client_config: dict | None = None) -> None:
    """Airflow reads its configuration at import time: everything is set before importing it."""
    airflow_home = OUT / "airflow"
    airflow_home.mkdir(parents=True)
    os.environ.update(
        {
            "AIRFLOW_HOME": str(airflow_home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("DEMO_LOG_LEVEL", "WARNING"),
            "AIRFLOW_CONN_KAFKA_EOS_DEFAULT": json.dumps(
                {"conn_type": "kafka_eos", "extra": client_config or {"bootstrap.servers": bootstrap}}
            ),
            "AIRFLOW_CONN_SPARK_LOCAL": json.dumps({"conn_type": "spark", "host": "local[2,3]"}),
            "KAFKA_EOS_PIPELINE_ID": PIPELINE_ID,
            "KAFKA_EOS_PIPELINE_TOPIC": TOPIC,
            # names the downstream DAG's Asset, so the commit's Asset events have a DAG waiting on them
            "KAFKA_EOS_PIPELINE_BOOTSTRAP_SERVERS": bootstrap,
            "KAFKA_EOS_PIPELINE_INPUT_DIR": str(OUT / "input"),
            "KAFKA_EOS_MANIFEST_BASE_URI": (OUT / "manifests").as_uri(),
            # dag.test() fails after a successful run of a DAG with a deadline on Airflow 3.3.2
            # (apache/airflow#73428): the demo runs the example pipelines without theirs.
            "KAFKA_EOS_PIPELINE_DEADLINE_FRACTION": "off",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        }
    )
    os.environ.pop("KAFKA_EOS_FAULT", None)
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True)
    # Parse the dags folder once, as a scheduler would: the downstream DAG's Asset becomes known and
    # active, so each commit's Asset event is recorded instead of warned about.
    subprocess.run([sys.executable, "-m", "airflow", "dags", "reserialize"], check=True, capture_output=True)


def run_pipeline(dag, batch: str, *, fault: str | None = None, again: bool = False) -> dict[str, str]:
    """One run for ``batch``: dated by the batch, or (``again``) dated "now" with the batch in its conf."""
    import pendulum

    logical_date = pendulum.now("UTC") if again else pendulum.parse(batch, tz="UTC")
    from kafka_eos_testing import fault_job

    submit = dag.get_task("submit")
    production_job = submit.application
    if fault:  # the test-only entry point reads the plan from its environment (spark/job.py never does)
        os.environ[fault_job.ENV_VAR] = fault
        submit.application = fault_job.FILE
    try:
        started = time.monotonic()
        run = dag.test(logical_date=logical_date, run_conf={"batch": batch} if again else None)
    finally:
        os.environ.pop(fault_job.ENV_VAR, None)
        submit.application = production_job
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    print(f"    run {batch}: {states} ({time.monotonic() - started:.0f}s)", flush=True)
    return states


SECURITY_MODES = {  # --security -> the Kafka node's options (kafka_eos_testing/apache_kafka/options.py)
    "plaintext": {},
    "sasl_ssl": {"tls": True, "sasl": True, "sasl_mechanism": "SCRAM-SHA-512"},
    "mtls": {"mtls": True},
}


def start_kafka(kind: str, security: str = "plaintext"):
    """The demo's Kafka: the embedded broker (no JVM, no Maven) or a real Apache Kafka node."""
    options = {"data_dir": str(OUT / "broker"), "partitions": 3}
    if kind == "apache":
        from kafka_eos_testing.apache_kafka import ApacheKafkaCluster

        say(f"starting Apache Kafka 4.4, one KRaft node, {security} (jars from the Maven cache)")
        broker = ApacheKafkaCluster({**options, **SECURITY_MODES[security]})
        print(f"    listening on {broker.bootstrap}; log: {broker.nodes[0].log_path}")
        return broker
    from kafka_eos_testing.embedded import start_embedded_broker

    say("starting the embedded Kafka broker (kafka-eos-devbroker)")
    broker = start_embedded_broker(options, str(OUT))
    print(f"    listening on {broker.bootstrap}; log: {OUT / 'broker.log'}")
    return broker


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The demo's options; a combination it cannot run is refused here, before anything starts."""
    parser = argparse.ArgumentParser(prog="./run demo", description="the example pipeline DAG, end to end")
    parser.add_argument("--kafka", choices=("embedded", "apache"), default="embedded")
    parser.add_argument(
        "--security",
        choices=tuple(SECURITY_MODES),
        default="plaintext",
        help="with --kafka apache: a SASL_SSL (SCRAM-SHA-512) or mutual-TLS node instead of plaintext",
    )
    parser.add_argument(
        "--pipeline",
        choices=("files", "kafka-to-kafka"),
        default="files",
        help="files: dags/eos_pipeline.py (JSON files in); kafka-to-kafka: dags/eos_kafka_to_kafka.py "
        "(a Kafka topic in, the consumer group's offsets committed with the output)",
    )
    parser.add_argument("--spark", choices=("submit", "connect"), default="submit",
                        help="submit: spark-submit per run; connect: one local Spark Connect server")
    args = parser.parse_args(argv)
    if args.spark == "connect" and args.pipeline != "files":
        parser.error("--spark connect runs the files pipeline (dags/eos_pipeline.py) only")
    if args.security != "plaintext" and args.kafka != "apache":
        parser.error(f"--security {args.security} needs --kafka apache (the embedded broker is plaintext)")
    if args.security != "plaintext" and args.pipeline == "kafka-to-kafka":
        # Refused before anything starts: the job would refuse the connection only after the node,
        # Airflow and the connector were set up (spark/kafka_source.py's source_options).
        parser.error(f"--pipeline kafka-to-kafka runs on a plaintext node only: Spark's Kafka source, "
                     "which reads the input, takes PLAINTEXT or SSL with a CA file, not the client "
                     f"credentials of --security {args.security}; leave --security out")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    sys.path.insert(0, str(ROOT / "dags"))
    from eos_sample_events import write_batch

    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    stack = contextlib.ExitStack()
    broker = start_kafka(args.kafka, args.security)
    stack.callback(broker.stop)
    # The super user's client config: SCRAM user and password, or the client certificate and key.
    secured = args.security != "plaintext"
    client = broker.admin_config() if secured else {"bootstrap.servers": broker.bootstrap}
    try:
        if args.pipeline == "kafka-to-kafka":
            import demo_kafka_to_kafka

            say("Spark's Kafka connector: spark-sql-kafka of this PySpark (Maven, cached after one run)")
            demo_kafka_to_kafka.configure(OUT)
        say("Airflow home, metadata database, connections")
        prepare_environment(broker.bootstrap, client)
        if secured:
            print(f"    kafka_eos_default: {client['security.protocol']} to {broker.bootstrap}")
        print(f"    AIRFLOW_HOME={os.environ['AIRFLOW_HOME']}")
        if args.pipeline == "kafka-to-kafka":
            return demo_kafka_to_kafka.run(ROOT, OUT, client, say)

        if args.spark == "connect":
            connect = start_spark_connect()
            stack.callback(connect.stop)
        say(f"generating input: {len(BATCHES)} batches of JSON events under {OUT / 'input'}")
        expected: list[str] = []
        for i, batch in enumerate(BATCHES):
            keys = write_batch(OUT / "input", batch, users=150 + 50 * i)
            expected += keys
            print(f"    {batch}: {len(keys)} users")

        from airflow.dag_processing.dagbag import DagBag

        bag = DagBag(dag_folder=str(ROOT / "dags" / "eos_pipeline.py"))
        if bag.import_errors:
            print(f"the pipeline DAG does not import: {bag.import_errors}", file=sys.stderr)
            return 1
        dag = bag.get_dag("eos_pipeline")

        say("running the pipeline DAG once per batch (preflight -> submit -> commit)")
        failed = []
        for batch in BATCHES:
            fault = FAULT if batch == FAULTY_BATCH and args.spark == "submit" else None
            if fault:
                print(f"    injecting a fault into {batch}: {fault} (a Spark task dies mid-write)")
            states = run_pipeline(dag, batch, fault=fault)
            failed += [f"{batch}:{t}" for t, s in states.items() if s != "success"]
        say(f"triggering {FAULTY_BATCH} again as a new run, as from the trigger form (must write nothing)")
        states = run_pipeline(dag, FAULTY_BATCH, again=True)
        # Its input is already COMMITTED: submit and commit skip, saying "already written by run ...".
        expected_states = {"preflight": "success", "submit": "skipped", "commit": "skipped"}
        failed += [f"{FAULTY_BATCH} rerun:{t}={s}" for t, s in states.items() if s != expected_states.get(t)]

        return report(client, expected, failed)
    finally:
        stack.close()


def start_spark_connect():
    """A local Spark Connect server for the demo's runs; the pipeline DAG's submit task uses it."""
    from kafka_eos_testing.spark_connect import SparkConnectServer

    say("starting a local Spark Connect server (one for every run)")
    server = SparkConnectServer(log_path=OUT / "spark-connect.log")
    host_port = server.url.removeprefix("sc://")
    os.environ["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"] = json.dumps(
        {"conn_type": "spark_connect", "host": host_port.split(":")[0], "port": int(host_port.split(":")[1])})
    os.environ["KAFKA_EOS_PIPELINE_SPARK"] = "connect"
    print(f"    {server.url}, ready in {server.startup_s:.0f}s; log: {OUT / 'spark-connect.log'}")
    return server


def report(client: dict, expected: list[str], failed: list[str]) -> int:
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import find_manifests
    from kafka_eos_testing.verify import count_keys, exactly_once_report

    say("manifests")
    for uri, manifest in find_manifests((OUT / "manifests").as_uri(), PIPELINE_ID):
        records = sum(c.record_count for c in manifest.committables)
        print(f"    {manifest.status.value:9} checkpoint {manifest.checkpoint_id}: "
              f"{len(manifest.committables)} transaction(s), {records} record(s)  {uri}")

    say(f"exactly-once report for topic {TOPIC} (read_committed consumer)")
    committed = count_keys(client, TOPIC)
    in_log = sum(count_keys(client, TOPIC, isolation="read_uncommitted").values())
    result = exactly_once_report(committed, expected)
    print(f"    records expected : {result.expected}")
    print(f"    records seen     : {result.seen}")
    print(f"    duplicates       : {len(result.duplicates)}")
    print(f"    missing          : {len(result.missing)}")
    print(f"    unexpected       : {len(result.unexpected)}")
    print(f"    (records in the log incl. aborted attempts, read_uncommitted: {in_log})")
    if failed:
        print(f"    tasks that did not end as expected: {', '.join(failed)}")
    print()
    print(result.render())
    return 0 if result.ok and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
