"""The soak's nemesis: seeded random faults against every process of the deployment, each logged.

A *target* is a role (``kafka-node``, ``airflow-scheduler``, ``airflow-task``, ``spark-driver``,
...) with a way to list its live processes and, where something must bring it back, a way to
restart it. Every few seconds the nemesis draws (from its own ``random.Random(seed)``) a role and
a fault, and records it in the history with the process's pid and command line:

- ``kill``: SIGKILL of one process; a restartable role is started again after a drawn delay;
- ``pause``: SIGSTOP of one process for a drawn 1-8 s, then SIGCONT (a GC pause, a frozen VM).

Faults overlap (a pause may still hold while a kill happens elsewhere), with one bound: at
most one Kafka node is down or paused at a time, so the 3-node cluster keeps its quorum and
``min.insync.replicas=2`` (two nodes down is an outage, where exactly-once holds but nothing
progresses, which a soak learns nothing from). :meth:`Nemesis.heal` undoes everything pending:
every paused process continued, every killed restartable role started again.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import psutil
from soak_history import History


@dataclass
class Target:
    """One role: its live processes now, and how to bring a killed one back (None: nothing to do,
    e.g. a task process whose retry Airflow schedules by itself)."""

    role: str
    processes: Callable[[], list[psutil.Process]]
    restart: Callable[[psutil.Process], None] | None = None
    kafka_node: bool = False
    group: bool = False  # a service: kill its whole process group (it and its children), as a crash does
    actions: tuple[str, ...] = ("kill", "pause")  # the faults it may get


def descendants(root_pid: int | None, match: Callable[[psutil.Process], bool]) -> list[psutil.Process]:
    """Live descendants of ``root_pid`` that ``match`` (processes that vanish meanwhile are left out)."""
    if root_pid is None:
        return []
    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if child.is_running() and child.status() != psutil.STATUS_ZOMBIE and match(child):
                found.append(child)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def command_line(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())[:300]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"


class Nemesis:
    """Draws and applies faults in a thread until :meth:`stop`; :meth:`heal` undoes what is pending."""

    def __init__(self, seed: int, targets: list[Target], history: History, *,
                 interval_s: tuple[float, float] = (4.0, 12.0), pause_s: tuple[float, float] = (1.0, 8.0),
                 restart_after_s: tuple[float, float] = (2.0, 15.0)) -> None:
        self.random = random.Random(seed)
        self.targets = targets
        self.history = history
        self.interval_s, self.pause_s, self.restart_after_s = interval_s, pause_s, restart_after_s
        self.faults = 0
        self.by_kind: Counter[str] = Counter()  # "kill:kafka-node" -> how many
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._paused: dict[int, tuple[psutil.Process, float, Target]] = {}  # pid -> (process, until, role)
        self._down: list[tuple[Target, psutil.Process, float]] = []  # killed, restart at
        self._thread = threading.Thread(target=self._run, name="soak-nemesis", daemon=True)

    @property
    def kinds(self) -> set[str]:
        """The faults applied at least once, as ``action:role``."""
        return set(self.by_kind)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        self.heal()

    def halt(self) -> None:
        """Stop drawing and continue every paused process, restarting nothing: for a teardown
        (a soak stopped half way, e.g. by its timeout), before its servers are stopped."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=120)
        with self._lock:
            for pid, (process, _, target) in list(self._paused.items()):
                self._continue(pid, process, target)
            self._down.clear()

    # -- the loop ------------------------------------------------------------------------------

    def _run(self) -> None:
        next_fault = time.monotonic() + self.random.uniform(*self.interval_s)
        while not self._stop.wait(0.2):  # the nemesis's own tick; faults are drawn on their schedule
            self._undo_due(time.monotonic())
            if time.monotonic() >= next_fault:
                try:
                    self._one_fault()
                except Exception as err:  # a fault that could not be applied is logged, never fatal
                    self.history.record("fault_error", error=repr(err))
                next_fault = time.monotonic() + self.random.uniform(*self.interval_s)

    def _kafka_busy(self) -> bool:
        return any(t.kafka_node for t, _, _ in self._down) or any(
            t.kafka_node for _, _, t in self._paused.values())

    def _one_fault(self) -> None:
        target = self.random.choice(self.targets)
        kind = self.random.choice(target.actions)  # the same draws as before for ("kill", "pause")
        with self._lock:
            if target.kafka_node and self._kafka_busy():
                return
            candidates = [p for p in target.processes() if p.pid not in self._paused]
            if not candidates:
                return
            process = self.random.choice(candidates)
            described = {"role": target.role, "pid": process.pid, "cmd": command_line(process)}
            if kind == "kill":
                if target.group:
                    os.killpg(process.pid, signal.SIGKILL)
                else:
                    os.kill(process.pid, signal.SIGKILL)
                restart_at = None
                if target.restart is not None:
                    restart_at = time.monotonic() + self.random.uniform(*self.restart_after_s)
                    self._down.append((target, process, restart_at))
                self.history.record("fault", action="kill", **described)
            else:
                until = time.monotonic() + self.random.uniform(*self.pause_s)
                os.kill(process.pid, signal.SIGSTOP)
                self._paused[process.pid] = (process, until, target)
                self.history.record("fault", action="pause", **described)
            self.faults += 1
            self.by_kind[f"{kind}:{target.role}"] += 1

    def _undo_due(self, now: float) -> None:
        with self._lock:
            for pid, (process, until, target) in list(self._paused.items()):
                if until <= now:
                    self._continue(pid, process, target)
            for item in list(self._down):
                target, process, restart_at = item
                if restart_at <= now:
                    self._down.remove(item)
                    self._restart(target, process)

    def _continue(self, pid: int, process: psutil.Process, target: Target) -> None:
        del self._paused[pid]
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return  # killed while paused (by us or by its parent): nothing to continue
        self.history.record("fault_end", action="continue", role=target.role, pid=pid)

    def _restart(self, target: Target, process: psutil.Process) -> None:
        try:
            target.restart(process)
            self.history.record("fault_end", action="restart", role=target.role, pid=process.pid)
        except Exception as err:  # the next heal() tries again
            self._down.append((target, process, time.monotonic() + 5))
            self.history.record("fault_error", action="restart", role=target.role, error=repr(err))

    def heal(self) -> None:
        """Continue every paused process and restart every killed restartable role, now."""
        with self._lock:
            for pid, (process, _, target) in list(self._paused.items()):
                self._continue(pid, process, target)
            down, self._down = self._down, []
        for target, process, _ in down:
            target.restart(process)
            self.history.record("fault_end", action="restart", role=target.role, pid=process.pid)
