"""Print a real ``kafka-eos-txn`` session on the embedded broker, as Markdown, for docs/cli.md.

    .venv/bin/python scripts/cli_transcript.py > /tmp/transcript.md

Starts ``kafka-eos-devbroker`` (the test double, as a user would), leaves a committed batch and a
few open transactions behind (and, at the end, a hanging one: the broker runs without partition
verification), writes a PREPARED checkpoint manifest for one of them, then runs the
installed ``kafka-eos-txn`` the way an operator would and prints each command with its output and
exit code. Nothing is invented: re-run it and paste the output between the transcript markers of
docs/cli.md (ages, producer ids and the port change from run to run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from kafka_eos_testing.embedded import EmbeddedBroker
from kafka_eos_testing.transactions import (
    produce_transaction,
    write_hanging_transaction,
    write_prepared_manifest,
)

CLI = str(Path(sys.executable).with_name("kafka-eos-txn"))
WORK = Path("/tmp/kafka-eos-transcript")  # noqa: S108 (a fixed, readable path: it is printed in the docs)
STORE = WORK / "manifests"


def shell(line: str, env: dict[str, str], out: list[str]) -> str:
    """Run one command line as a shell would (``kafka-eos-txn`` is the installed script)."""
    command = line.replace("kafka-eos-txn", CLI, 1)
    bash = shutil.which("bash") or "/bin/bash"
    result = subprocess.run([bash, "-c", command], capture_output=True, text=True, env=env, timeout=120)
    out.append(f"$ {line}")
    text = (result.stdout + result.stderr).rstrip("\n")
    if text:
        out.append(text)
    if result.returncode:
        out.append(f"[exit {result.returncode}]")
    out.append("")
    return result.stdout


def main() -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    STORE.mkdir(parents=True)
    # Partition verification off: the last part writes a truly hanging transaction (KIP-664).
    broker = EmbeddedBroker(
        {"partitions": 2, "transaction_partition_verification": False}, str(WORK / "broker.log")
    )
    broker.start()
    try:
        bootstrap = broker.bootstrap
        produce_transaction(bootstrap, "etl-orders-9-1", "orders", [b"o1", b"o2", b"o3"], commit=True)
        for tid, keys in (("etl-orders-0-2", [b"a1", b"a2"]), ("etl-orders-1-2", [b"b1", b"b2", b"b3"])):
            produce_transaction(
                bootstrap, tid, "orders", keys, transaction_timeout_ms=600_000, partitions=[0]
            )
        config = KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})
        with TransactionAdmin(config) as admin:
            manifest = write_prepared_manifest(
                admin,
                STORE.as_uri(),
                "orders",
                "orders",
                ["etl-orders-1-2"],
                checkpoint_id=2,
                prefix="etl-orders-",
            )
        env = {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "KAFKA_EOS_MANIFEST_BASE_URI": STORE.as_uri(),
        }
        env.pop("KAFKA_EOS_COMMAND_CONFIG", None)
        out: list[str] = [
            f"$ export KAFKA_BOOTSTRAP_SERVERS={bootstrap}      # or --bootstrap-server on each command",
            f"$ export KAFKA_EOS_MANIFEST_BASE_URI={STORE.as_uri()}   # or --manifest-base",
            "",
        ]
        for line in (
            "kafka-eos-txn --version",
            "kafka-eos-txn list --prefix etl-orders-",
            "kafka-eos-txn describe --prefix etl-orders-",
            "kafka-eos-txn find-hanging --prefix etl-orders- --min-age 0s",
            "kafka-eos-txn checkpoints",
            "kafka-eos-txn abort --prefix etl-orders- --min-age 0s --dry-run",
            "kafka-eos-txn abort --prefix etl-orders- --min-age 0s",
            "kafka-eos-txn abort --transactional-id etl-orders-1-2",
            f"kafka-eos-txn commit --manifest {manifest} --dry-run",
            f"kafka-eos-txn commit --manifest {manifest}",
            "kafka-eos-txn commit --transactional-id etl-orders-1-2 --producer-id 1 --json",
            "kafka-eos-txn list --bootstrap-servers $KAFKA_BOOTSTRAP_SERVERS --state CompleteCommit",
        ):
            shell(line, env, out)
        produce_transaction(
            bootstrap, "etl-orders-2-3", "orders", [b"c1"], transaction_timeout_ms=600_000, partitions=[1]
        )
        found = shell("kafka-eos-txn find-hanging --topic orders --json", env, out)
        row = __import__("json").loads(found)["rows"][0]
        target = (
            f"--topic orders --partition {row['partition']} --producer-id {row['producer_id']} "
            f"--epoch {row['producer_epoch']}"
        )
        for line in (
            f"kafka-eos-txn abort-partition {target}",
            f"kafka-eos-txn abort-partition {target} --force",
            "kafka-eos-txn find-hanging --topic orders",
            "kafka-eos-txn abort --transactional-id etl-orders-2-3",
        ):
            shell(line, env, out)
        # A hanging transaction: a batch on orders-0 that no coordinator knows of.
        write_hanging_transaction(bootstrap, "orders", 0, [b"h1", b"h2"])
        for line in (
            "kafka-eos-txn find-hanging --topic orders",
            "kafka-eos-txn abort-partition --topic orders --partition 0",
            "kafka-eos-txn find-hanging --topic orders",
            "kafka-eos-txn runbook | head -4",
        ):
            shell(line, env, out)
        print("```console")
        print("\n".join(out).rstrip())
        print("```")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
