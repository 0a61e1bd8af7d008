"""A retry of the submit task waits for the spark-submit its earlier try left running, instead of
starting the job again (Airflow >= 3.3's task state store).

The job runs in a process group of its own (``hooks/spark_submit.py``), so when the task's
process dies (the OOM killer, a kill of the task runner, a supervisor that lost its task) the job
goes on: it still prepares its checkpoint and writes the manifest. Without this module the retry
starts a second job for the same checkpoint, which fences the first one's transactions (same
transactional ids) and writes the batch again from the start: correct, but the work is done twice
and the two jobs race for the manifest. With it, a client-mode job (the driver is spark-submit's own
process on this host: ``--master local[...]``, or a standalone cluster's ``spark://`` master) is
recorded in the task instance's state before the task waits on it (:func:`remember`); a retry on
the same host that finds it still running waits for it to end (:func:`wait_left_running`) and then
reads its checkpoint's manifest as if it had run the job itself (the manifest is the result; the
job's output line went to the dead try).

A standalone cluster runs no Python driver in cluster deploy mode (the operator refuses it,
``hooks/spark_submit.check_deploy_target``), so a pipeline there runs in client mode and is
re-attached to here, by pid. In YARN or Kubernetes cluster deploy mode the driver is on the cluster
and the operator leaves re-attach to the Spark provider's ``SparkSubmitOperator.execute``: on
Airflow >= 3.3 (``durable``) it records the application in the same store and polls it on a retry,
given ``yarn_track_via_rm_api=True`` (YARN; without it the provider refuses) or
``track_driver_via_k8s_api=True`` (Kubernetes; without it a retry submits anew), docs/user-guide/airflow-3.md.

Kept on the safe side: the record names the host, the checkpoint and the process's start
(:func:`process_start`: a reused pid is a different process); a job on another host (another Celery
worker), of another checkpoint, or already ended is not waited for, and the retry runs the job as
before. A store that cannot be read or written disables the re-attach for this try, logged by name:
never the task.
Airflow without a task state store (< 3.3): nothing is recorded, as before.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from airflow_provider_kafka_eos.tasks.airflow_features import has

__all__ = ["STATE_KEY", "LeftRunning", "process_start", "remember", "stop", "wait_for_earlier_try"]

log = logging.getLogger(__name__)

STATE_KEY = "kafka_eos_spark_submit"  # renaming it strands the records of tries in flight
_POLL_S = 1.0
_PROGRESS_EVERY_S = 60.0


@dataclass(frozen=True)
class LeftRunning:
    """A local spark-submit a try started: where, which process, for which checkpoint."""

    host: str
    pid: int
    started: str  # process_start(pid): a reused pid is another process
    checkpoint_id: int
    try_number: int | None


def _store(context: Any) -> Any:
    """The task instance's state store, or None (Airflow < 3.3, or a context without one)."""
    return (context or {}).get("task_state_store") if has("task_state_store") else None


def remember(context: Any, pid: int, checkpoint_id: int, try_number: int | None) -> None:
    """Record the job this try just started (before waiting on it). Best effort: logged, never fatal."""
    store = _store(context)
    if store is None:
        return
    try:
        record = LeftRunning(socket.gethostname(), pid, process_start(pid), checkpoint_id, try_number)
        store.set(STATE_KEY, asdict(record))
    except Exception as err:  # the job runs on regardless; a retry then starts it again, as before
        log.warning("spark-submit pid %d not recorded in the task's state (%s): a retry of this task "
                    "will start the job again instead of waiting for this one", pid, err)


def left_running(context: Any, checkpoint_id: int) -> LeftRunning | None:
    """The job an earlier try of this task instance left running on this host, for this checkpoint."""
    store = _store(context)
    if store is None:
        return None
    try:
        raw = store.get(STATE_KEY)
    except Exception as err:
        log.warning("the task's state could not be read (%s): not looking for a job an earlier try left "
                    "running; starting the job", err)
        return None
    if not isinstance(raw, dict):
        return None
    try:
        record = LeftRunning(**raw)
    except TypeError:
        log.warning("task state %s holds %r, not a job record: starting the job", STATE_KEY, raw)
        return None
    if record.host != socket.gethostname() or record.checkpoint_id != checkpoint_id:
        return None  # another worker's process cannot be waited on from here; fencing covers it
    return record if _still_running(record) else None


def process_start(pid: int) -> str:
    """When process ``pid`` started, in a form that names it on this host across clock changes.

    On Linux: the boot's id and the start in clock ticks since boot (``/proc/<pid>/stat``). psutil's
    ``create_time()`` adds the boot's wall-clock time to those ticks, which moves when the clock is
    stepped (``btime`` in /proc/stat): a step while a retry waits would make the running job look
    ended, and the retry would start a second one. Elsewhere (no ``/proc``): psutil's ``create_time()``.
    Raises ``psutil.Error`` (or ``OSError``) when the process is gone or not readable.
    """
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            raise  # Linux, and the process is gone
        import psutil

        return f"{psutil.Process(pid).create_time():.3f}"
    # Fields after the command's name, which is in parentheses and may hold spaces or ')': the
    # start time is field 22 of proc(5), the 20th after that name.
    return f"{boot_id}/{stat_line.rsplit(')', 1)[1].split()[19]}"


def _still_running(record: LeftRunning) -> bool:
    import psutil

    try:
        return process_start(record.pid) == record.started and \
            psutil.Process(record.pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError):  # gone, or not ours to look at
        return False


def wait_left_running(record: LeftRunning, timeout_s: float) -> bool:
    """Wait until the recorded job has ended (True), at most ``timeout_s``; then stop it (False).

    A job still running after that long is stuck or slower than the task allows: it is this task's
    own job for this checkpoint, so its process group is stopped and the caller starts the job
    afresh (whose producers would fence this one's transactions anyway). Progress is logged every
    minute, naming the process.
    """
    started = time.monotonic()
    next_note = started + _PROGRESS_EVERY_S
    while _still_running(record):
        now = time.monotonic()
        if now - started >= timeout_s:
            log.warning("spark-submit pid %d (try %s) still runs after %.0f s of waiting: stopping it and "
                        "starting the job again", record.pid, record.try_number, now - started)
            stop(record)
            return False
        if now >= next_note:
            log.info("still waiting for spark-submit pid %d (started by try %s) after %.0f s",
                     record.pid, record.try_number, now - started)
            next_note = now + _PROGRESS_EVERY_S
        time.sleep(_POLL_S)  # polling another process's end: it is not this process's child
    log.info("spark-submit pid %d %s %.0f s later; its checkpoint's manifest is the result", record.pid,
             _how_it_ended(record), time.monotonic() - started)
    return True


def _how_it_ended(record: LeftRunning) -> str:
    """What the wait saw end, for the log: the process, or the pid now naming another process."""
    try:
        now = process_start(record.pid)
    except Exception:  # gone (or unreadable): the usual end
        return "ended"
    if now == record.started:  # a zombie its parent has not reaped yet
        return "ended"
    return f"ended (pid {record.pid} now names another process: started {now}, recorded {record.started})"


def stop(record: LeftRunning) -> None:
    """Stop the recorded job (SIGTERM to its process group: its own session, so the whole job), if it
    is still that process: the waiting task was killed, or waited past its bound."""
    if _still_running(record):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(record.pid, signal.SIGTERM)


def wait_for_earlier_try(context: Any, checkpoint_id: int, *, timeout_s: float,
                         found: Callable[[LeftRunning], None] | None = None) -> bool:
    """Whether an earlier try's local job for this checkpoint was running here and has now ended.

    ``found`` is told the job before the wait (the operator's ``on_kill`` stops it). The caller
    then reads the checkpoint's manifest as that job's result, and runs the job itself when there
    is none (the job failed before preparing) or when this returns False."""
    record = left_running(context, checkpoint_id)
    if record is None:
        return False
    if found is not None:
        found(record)
    log.warning("try %s left its spark-submit (pid %d, checkpoint %d) running on this host: waiting for "
                "it to end instead of starting the job a second time", record.try_number, record.pid,
                checkpoint_id)
    return wait_left_running(record, timeout_s)
