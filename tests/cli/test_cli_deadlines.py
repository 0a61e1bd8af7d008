"""``--timeout`` is the whole command's deadline, whatever the cluster does or does not answer.

Issue #13: a transactional id with a lone surrogate made the CLI hang past ``--timeout 3s``
(kafka-python failed to encode the request on its IO thread and our wire layer waited on it
without a deadline), so a commit task could outlive its transaction; ``--timeout 0s`` silently
meant 10 s. Each test runs the installed console script as a subprocess, as an operator does,
against a real embedded broker or a loopback server that misbehaves on purpose.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_servers import silent_server, trickle_server

CLI = str(Path(sys.executable).with_name("kafka-eos-txn"))
# Interpreter start-up and imports (kafka-python, confluent-kafka, rich) on a busy 2-core machine,
# plus the time to notice the deadline and close connections.
MARGIN_S = 4.0


def run_timed(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)
    return result, time.monotonic() - started


def one_line_error(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.mark.parametrize("action", ["list", "find-hanging", "describe"])
def test_a_server_that_never_answers_ends_at_the_deadline(action):
    extra = ["--transactional-id", "etl-1"] if action == "describe" else []
    with silent_server() as address:
        result, elapsed = run_timed(
            action, "--bootstrap-servers", address, "--timeout", "3s", *extra
        )
    assert result.returncode == 1
    assert "broker-unreachable" in one_line_error(result)
    assert elapsed < 3 + MARGIN_S, f"took {elapsed:.1f} s with --timeout 3s"


def test_a_server_that_answers_a_byte_at_a_time_ends_at_the_deadline():
    with trickle_server(interval_s=0.2) as address:
        result, elapsed = run_timed(
            "describe", "--bootstrap-servers", address, "--timeout", "3s",
            "--transactional-id", "etl-1",
        )
    assert result.returncode == 1
    assert "broker-unreachable" in one_line_error(result)
    assert elapsed < 3 + MARGIN_S, f"took {elapsed:.1f} s with --timeout 3s"


def test_lone_surrogate_id_is_refused_before_any_request(kafka_broker):
    """Undecodable argv bytes (Python hands them over as lone surrogates) name the id; exit 2."""
    result = subprocess.run(
        [CLI.encode(), b"describe", b"--bootstrap-servers", kafka_broker.bootstrap.encode(),
         b"--transactional-id", b"etl-\xed\xa0\x80-1", b"--timeout", b"3s"],
        capture_output=True, timeout=120,
    )
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, stderr
    assert "--transactional-id" in stderr and "lone surrogate" in stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr


@pytest.mark.parametrize("value", ["0s", "0ms", "-1s", "-5m", "0"])
def test_zero_or_negative_timeout_is_a_usage_error(value):
    result, elapsed = run_timed(
        "list", "--bootstrap-servers", "127.0.0.1:1", f"--timeout={value}"
    )
    assert result.returncode == 2
    line = one_line_error(result)
    assert "--timeout" in line and ("positive" in line or "negative" in line or "duration" in line), line
    assert elapsed < MARGIN_S + 2, "a usage error must not wait for any broker"
