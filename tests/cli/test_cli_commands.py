"""``kafka-eos-txn`` subcommands: help, version, completion,
JSON failures, ``--conn-id`` without Airflow, the runbook on a terminal. No broker needed.

Each test runs the installed console script (or ``python -m``) in a subprocess, as an operator would.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import pytest
from eos_cli_helpers import CLI

from airflow_provider_kafka_eos import __version__, runbook
from airflow_provider_kafka_eos.cli.options import COMMANDS
from airflow_provider_kafka_eos.cli.output import print_runbook
from airflow_provider_kafka_eos.kafka.operations.resolution_request import ACTIONS

HEAVY = ("kafka", "confluent_kafka", "rich", "airflow", "pyspark", "pandas", "pyarrow", "fsspec")


def run(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def test_commands_are_the_actions_plus_checkpoints():
    assert set(COMMANDS) == {*ACTIONS, "checkpoints"}


@pytest.mark.parametrize(
    "args", [["--help"], ["--version"], ["abort", "--help"], ["list", "--help"]]
)
def test_help_and_version_import_no_client_library(args):
    """What makes them start fast: no Kafka client, rich or Airflow is imported (``-X importtime``)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "airflow_provider_kafka_eos.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {
        line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    heavy = sorted(m for m in imported if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy
    if args == ["--version"]:
        assert result.stdout == f"kafka-eos-txn {__version__}\n"


def test_every_command_has_its_own_help():
    for name in (*COMMANDS, "runbook", "completion"):
        result = run(name, "--help")
        assert result.returncode == 0, (name, result.stderr)
        assert result.stdout.startswith(f"usage: kafka-eos-txn {name} "), name
    listing = run("list", "--help").stdout
    abort = run("abort", "--help").stdout
    for option in ("--bootstrap-server", "--conn-id", "--command-config", "--json", "--timeout"):
        assert option in listing and option in abort
    assert "--unprotected" in abort and "--dry-run" in abort and "--manifest-base" in abort
    assert "--unprotected" not in listing and "--dry-run" not in listing  # only what means something
    partition = run("abort-partition", "--help").stdout
    assert "--partition" in partition and "--force" in partition and "WriteTxnMarkers" in partition


def test_an_option_of_another_command_is_refused_by_the_subcommand():
    result = run("list", "--bootstrap-server", "127.0.0.1:1", "--unprotected")
    assert result.returncode == 2 and "unrecognized arguments: --unprotected" in result.stderr
    assert result.stderr.count("\n") == 1


def test_json_failures_are_json_on_stdout():
    # the request's own rule (both spellings of the option), argparse's refusal, and an unreachable cluster
    for form in (["commit", "--bootstrap-server"], ["commit", "--bootstrap-servers"]):
        usage = run(*form, "127.0.0.1:1", "--transactional-id", "t-1", "--producer-id", "5", "--json")
        assert usage.returncode == 2
        doc = json.loads(usage.stdout)
        assert doc["ok"] is False and doc["exit_code"] == 2
        assert doc["error"].startswith("t-1: commit needs --producer-id and --epoch")
        assert doc["runbook"] == runbook.page_url("resolve-manually")
        assert usage.stderr.count("\n") == 1  # the one line for people stays
    refused = run("list", "--bootstrap-server", "127.0.0.1:1", "--bogus", "--json")
    assert refused.returncode == 2 and json.loads(refused.stdout)["error"].startswith(
        "unrecognized arguments"
    )
    unreachable = run("list", "--bootstrap-server", "127.0.0.1:1", "--timeout", "2s", "--json")
    assert unreachable.returncode == 1
    doc = json.loads(unreachable.stdout)
    assert doc["ok"] is False and doc["runbook_page"] == "broker-unreachable"
    assert "no Kafka broker at 127.0.0.1:1 answered" in doc["error"]


def test_conn_id_without_airflow_is_a_named_usage_error():
    """Airflow made unimportable in the child (``sys.modules['airflow'] = None``), as where it is
    not installed; nothing is contacted."""
    code = (
        "import sys; sys.modules['airflow'] = None\n"
        "from airflow_provider_kafka_eos.cli import run\n"
        "sys.exit(run(['list', '--conn-id', 'kafka_eos_default', '--json']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    doc = json.loads(result.stdout)
    assert "--conn-id 'kafka_eos_default' needs Apache Airflow, which is not installed" in doc["error"]
    assert "--bootstrap-server / --command-config instead" in doc["error"]


def test_conn_id_and_command_config_together_are_refused(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("bootstrap.servers=127.0.0.1:1\n")
    code = (
        "import sys; sys.modules['airflow'] = None\n"
        "from airflow_provider_kafka_eos.cli import run\n"
        f"sys.exit(run(['list', '--conn-id', 'x', '--command-config', {str(props)!r}]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "needs Apache Airflow" in result.stderr  # Airflow is asked first


def test_bootstrap_server_singular_and_plural_are_one_option():
    """Both spellings reach the named cluster (here: nothing listens, so its error)."""
    for args in (("list", "--bootstrap-server"), ("list", "--bootstrap-servers")):
        result = run(*args, "127.0.0.1:1", "--timeout", "2s")
        assert result.returncode == 1, (args, result.stderr)
        assert "127.0.0.1:1" in result.stderr, args
        assert "kafka-eos-txn runbook broker-unreachable" in result.stderr, args


def test_completion_code_and_answers(tmp_path):
    code = run("completion", "bash")
    assert code.returncode == 0 and "kafka-eos-txn" in code.stdout and "complete " in code.stdout

    def answers(line: str) -> list[str]:
        out = tmp_path / "answers"
        env = {
            "_ARGCOMPLETE": "1",
            "_ARGCOMPLETE_IFS": "\n",
            "COMP_LINE": line,
            "COMP_POINT": str(len(line)),
            "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
        }
        result = run(env=env)
        assert result.returncode == 0, result.stderr
        return sorted(a.strip() for a in out.read_text().split("\n") if a.strip())

    assert answers("kafka-eos-txn abo") == ["abort", "abort-partition"]
    assert "--dry-run" in answers("kafka-eos-txn abort --d")
    assert answers("kafka-eos-txn completion b") == ["bash"]


def test_runbook_plain_in_a_pipe_rendered_on_a_terminal():
    piped = run("runbook", "data-loss")
    assert piped.returncode == 0 and piped.stdout == runbook.read("data-loss")
    assert run("runbook").stdout.startswith("Runbook pages (kafka-eos-txn runbook PAGE")
    assert run("runbook", "no-such-page").returncode == 2
    out = io.StringIO()
    assert print_runbook("data-loss", out, io.StringIO(), render=True) == 0
    rendered = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    title = runbook.title("data-loss")
    assert title in rendered
    assert not any(line.startswith("#") for line in rendered.splitlines())  # headings rendered, not raw
