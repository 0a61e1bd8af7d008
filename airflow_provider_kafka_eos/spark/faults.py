"""Fault-injection points of the exactly-once write, for tests only.

A :class:`FaultPlan` reaches the writer only through an explicit test hook: the
``fault_plan=`` keyword of ``write_exactly_once`` / ``spark.job.run``, which production code
never passes (nothing on the production path reads an environment variable for it). The
spark-submit tests and the demo run ``testing/kafka_eos_testing/fault_job.py``, a
test-only entry point that parses ``KAFKA_EOS_FAULT`` (a comma-separated list of
``name[=value]``) and hands the plan to the job. The plan is shipped to the tasks inside the
task closure, so executors need no environment.

``kill_task_after_records=N``
    the task of partition ``kill_task_partition`` (default 0) flushes its first N records
    and then its Python worker dies (``os._exit``), on attempt 0 only: Spark retries the
    task, and the retry must fence the dead attempt's open transaction.
``hold_task_after_records=N`` and ``hold_dir=/path``
    like ``kill_task_after_records``, but instead of dying the task writes its pid to
    ``<hold_dir>/held-<partition>`` and waits for its executor to be killed from outside (a
    cluster test then ``kill -9``s the executor JVM or its worker). The Python worker exits
    when its parent goes away, or after 300 s.
``fail_task_partition=P``
    the task of partition P raises on every attempt once its records reached the broker
    (flushed, its transaction open): the job fails with open transactions and no manifest.
``exit_before_manifest``
    the driver exits (code 86) after every partition prepared, before the manifest is written.
``exit_after_manifest``
    the driver exits (code 87) after the manifest is written, before the job prints its
    result line (spark-submit fails although the checkpoint is prepared).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from airflow_provider_kafka_eos.kafka.errors import UsageError

__all__ = ["EXIT_AFTER_MANIFEST", "EXIT_BEFORE_MANIFEST", "FaultPlan", "InjectedFault"]

_WHAT = "fault plan"
EXIT_BEFORE_MANIFEST = 86
EXIT_AFTER_MANIFEST = 87
WORKER_KILLED = 85


class InjectedFault(RuntimeError):
    """Raised by ``fail_task_partition`` (an ordinary task failure Spark reports and retries)."""


@dataclass(frozen=True)
class FaultPlan:
    kill_task_after_records: int | None = None
    kill_task_partition: int = 0
    hold_task_after_records: int | None = None
    hold_dir: str | None = None
    fail_task_partition: int | None = None
    exit_before_manifest: bool = False
    exit_after_manifest: bool = False

    @classmethod
    def parse(cls, text: str | None) -> FaultPlan:
        values: dict[str, object] = {}
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            name, _, raw = item.partition("=")
            name = name.strip()
            if name in ("exit_before_manifest", "exit_after_manifest"):
                values[name] = True
            elif name == "hold_dir":
                values[name] = raw
            elif name in ("kill_task_after_records", "kill_task_partition", "fail_task_partition",
                          "hold_task_after_records"):
                try:
                    values[name] = int(raw)
                except ValueError:
                    raise UsageError(f"{_WHAT}: {name} needs an integer value, got {raw!r}",
                                     runbook="troubleshooting") from None
            else:
                raise UsageError(f"{_WHAT}: unknown fault {name!r}", runbook="troubleshooting")
        if ("hold_task_after_records" in values) != ("hold_dir" in values):
            raise UsageError(f"{_WHAT}: hold_task_after_records and hold_dir go together",
                             runbook="troubleshooting")
        return cls(**values)  # type: ignore[arg-type]

    @property
    def active(self) -> bool:
        return self != FaultPlan()

    # -- task side -------------------------------------------------------------------------

    def kill_point(self, partition: int, attempt: int, written: int, batch_rows: int) -> int | None:
        """How many rows of the next batch to write before the worker dies or holds (None: go on)."""
        after = self.kill_task_after_records if self.kill_task_after_records is not None \
            else self.hold_task_after_records
        if after is None or attempt != 0 or partition != self.kill_task_partition:
            return None
        remaining = after - written
        return max(0, remaining) if remaining <= batch_rows else None

    def check_task_failure(self, partition: int) -> None:
        if self.fail_task_partition is not None and partition == self.fail_task_partition:
            raise InjectedFault(f"{_WHAT}: injected failure of partition {partition}")

    # -- driver side -----------------------------------------------------------------------

    def before_manifest(self) -> None:
        if self.exit_before_manifest:
            _hard_exit(EXIT_BEFORE_MANIFEST)

    def after_manifest(self) -> None:
        if self.exit_after_manifest:
            _hard_exit(EXIT_AFTER_MANIFEST)


def stop_task(plan: FaultPlan, partition: int) -> None:
    """At the kill point: die (``kill_task_after_records``) or hold for an outside kill."""
    if plan.hold_task_after_records is None:
        kill_worker()
    import json
    import time
    from pathlib import Path

    parent = os.getppid()
    marker = Path(plan.hold_dir or ".", f"held-{partition}")
    marker.with_suffix(".tmp").write_text(json.dumps({"pid": os.getpid(), "parent": parent}))
    marker.with_suffix(".tmp").replace(marker)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and os.getppid() == parent:
        time.sleep(0.2)  # waiting to be killed from outside, not synchronising with anything
    kill_worker()


def kill_worker() -> None:
    """Die like a crashed executor: no cleanup, no EndTxn, no exception to catch."""
    _hard_exit(WORKER_KILLED)


def _hard_exit(code: int) -> None:
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
