"""Fetching a server's jars with Maven into a cache outside the repository, once per machine.

One owner for what every launcher of the test double needs (real Kafka's jars, Apicurio Registry's
runner): the cache lock, so parallel test runs fetch once and reuse each other's work; finding
``mvn``; a bounded Maven run; the errors that say what failed and what to do.
"""

from __future__ import annotations

import fcntl
import pathlib
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["locked_fetch", "maven_failure", "run_maven"]

_T = TypeVar("_T")


def locked_fetch(cache: pathlib.Path, cached: Callable[[pathlib.Path], _T | None],
                 fetch: Callable[[pathlib.Path], _T], error: Callable[[str], Exception],
                 artifact: str) -> _T:
    """``cached(cache)`` when the cache is complete; else ``fetch(cache)`` under the cache's lock (a
    process that waited for another one's fetch reuses it)."""
    found = cached(cache)
    if found:
        return found
    try:
        cache.mkdir(parents=True, exist_ok=True)
        lock = open(cache / ".lock", "a")  # noqa: SIM115 - held for the whole fetch
    except OSError as exc:
        raise error(f"cannot fetch {artifact}: the cache {cache} is not writable ({exc})") from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be fetching: wait, then reuse its work
        return cached(cache) or fetch(cache)


def run_maven(arguments: Sequence[str], *, artifact: str, cache: pathlib.Path,
              error: Callable[[str], Exception], timeout_s: float,
              cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    """``mvn <arguments>`` bounded by ``timeout_s``; the error names the artifact, the cache and the fix."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise error(
            f"cannot fetch {artifact} into {cache}: Maven (mvn) is not installed. "
            "Install it (Debian/Ubuntu: 'sudo apt-get install -y maven') and run again."
        )
    try:
        return subprocess.run([mvn, *arguments], capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise error(
            f"cannot fetch {artifact} into {cache}: Maven did not finish within {timeout_s:.0f} s "
            "(is Maven Central reachable?)"
        ) from None


def maven_failure(result: subprocess.CompletedProcess, *, artifact: str, cache: pathlib.Path,
                  error: Callable[[str], Exception], hint: str = "") -> Exception:
    """The error for a Maven run that did not bring the artifact: its last lines, and ``hint``."""
    output = (result.stdout + result.stderr).strip().splitlines()
    detail = "\n".join(output[-15:]) or f"exit code {result.returncode}"
    return error(f"cannot fetch {artifact} into {cache}: Maven failed (is Maven Central reachable?"
                 f"{hint}). Maven said:\n{detail}")
