"""The installed ``kafka-eos-txn`` script's argument layer: usage errors need no broker.

Each test runs the console script as a subprocess, as an operator would.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from airflow_provider_kafka_eos import runbook

CLI = str(Path(sys.executable).with_name("kafka-eos-txn"))


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout)


def test_help_lists_the_commands_and_no_other_form():
    result = run("--help")
    assert result.returncode == 0
    for command in ("list", "describe", "abort", "commit", "find-hanging", "abort-partition", "preflight",
                    "checkpoints", "runbook", "completion"):
        assert f"\n    {command} " in result.stdout, command
    assert "--action" not in result.stdout and "--runbook" not in result.stdout
    assert "exit codes: 0 done, 1 failed, 2 usage" in result.stdout


def test_a_command_help_lists_its_options_and_exit_codes():
    result = run("commit", "--help")
    assert result.returncode == 0
    for option in (
        "--bootstrap-server",
        "--transactional-id",
        "--producer-id",
        "--epoch",
        "--command-config",
        "--manifest",
        "--dry-run",
        "--json",
    ):
        assert option in result.stdout
    assert "exit codes: 0 done, 1 failed, 2 usage" in result.stdout


def test_commit_without_epoch_is_usage_error_with_the_validation_message():
    result = run(
        "commit",
        "--bootstrap-servers",
        "127.0.0.1:1",
        "--transactional-id",
        "t-1",
        "--producer-id",
        "5",
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "kafka-eos-txn: error: t-1: commit needs --producer-id and --epoch (from the checkpoint manifest or "
        f"`describe`). Next step: {runbook.reference('resolve-manually')}"
    )
    assert result.stdout == ""


def test_unknown_command_and_missing_bootstrap_are_usage_errors():
    bad = run("explode")
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1
    assert "invalid choice: 'explode' (choose from 'list', 'describe'," in bad.stderr
    assert "Next step: " in bad.stderr
    flag = run("--action", "list", "--bootstrap-server", "127.0.0.1:1")  # not a form this tool has
    assert flag.returncode == 2 and flag.stderr.count("\n") == 1 and "--action" in flag.stderr
    not_a_number = run("commit", "--transactional-id", "t", "--producer-id", "1", "--epoch", "x")
    assert not_a_number.returncode == 2 and "argument --epoch: invalid int value: 'x'" in not_a_number.stderr
    result = run("list")
    assert result.returncode == 2 and "--bootstrap-server is required" in result.stderr


def test_bad_min_age_is_usage_error():
    result = run("list", "--bootstrap-servers", "127.0.0.1:1", "--min-age", "soon")
    assert result.returncode == 2 and "--min-age must be a duration like 90s, 15m" in result.stderr


def test_unreachable_broker_fails_fast_with_one_line():
    started = time.monotonic()
    result = run("list", "--bootstrap-servers", "127.0.0.1:1", "--timeout", "2s")
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "no Kafka broker at 127.0.0.1:1 answered" in lines[0]
    assert "kafka-eos-txn runbook broker-unreachable (" in lines[0]
    assert "Traceback" not in result.stderr
    assert elapsed < 20, f"took {elapsed:.1f} s"


def test_command_config_secret_never_echoed(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text(
        "bootstrap.servers=127.0.0.1:1\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.username=etl\nsasl.password=hunter2-very-secret\n"
    )
    result = run("list", "--command-config", str(props), "--timeout", "2s", "--json")
    assert result.returncode == 1
    assert "hunter2" not in result.stderr + result.stdout


def test_malformed_command_config_is_usage_error(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("bootstrap.servers=127.0.0.1:1\nnot.a.kafka.key=1\n")
    result = run("list", "--command-config", str(props))
    assert result.returncode == 2 and "not.a.kafka.key" in result.stderr
