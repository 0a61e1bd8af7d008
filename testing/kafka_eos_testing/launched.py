"""One local server process a launcher starts, waits for and stops: the part every launcher shares.

A launcher (``schema_registry.py``, ``spark_connect.py``) builds its command line and says what
"ready" means (``_ready``: its API answers, not just its port); :class:`LaunchedServer` starts the
process in its own process group with its output in ``log_path``, waits for readiness within a
deadline (stopping the process if it dies or the deadline passes), and stops the whole group
(SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["LaunchedServer", "free_port"]


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the launchers bind loopback only)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LaunchedServer:
    """Subclasses set ``what`` (for messages) and ``url``, and implement ``_ready``."""

    what = "the server"
    url = ""
    stop_timeout_s = 20.0
    poll_interval_s = 0.2
    log_path: pathlib.Path | None = None
    process: subprocess.Popen

    def _launch(self, command: list[str], *, start_timeout_s: float, env: Mapping[str, str] | None = None,
                cwd: pathlib.Path | None = None) -> None:
        """Start ``command`` (output to ``log_path``) and return once ``_ready()``; stop it otherwise."""
        log: Any = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            if log is not subprocess.DEVNULL:
                log.close()
        self.started_s = time.monotonic()
        try:
            self._wait_until_ready(start_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - self.started_s

    def _ready(self) -> bool:
        raise NotImplementedError

    def _log_hint(self) -> str:
        return f"; log: {self.log_path}" if self.log_path else ""

    def _wait_until_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.what} exited with {self.process.returncode} before it was ready"
                                   + self._log_hint())
            if self._ready():
                return
            time.sleep(self.poll_interval_s)  # polling interval of a deadline-bounded wait
        raise TimeoutError(f"{self.what} at {self.url} was not ready within {timeout_s:.0f} s"
                           + self._log_hint())

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after ``stop_timeout_s``."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
