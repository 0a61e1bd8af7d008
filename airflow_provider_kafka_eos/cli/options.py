"""The command line of ``kafka-eos-txn``: one subcommand per action, each with its own options.

A subcommand takes only the options that mean something to it (``kafka-eos-txn abort --help``
lists them), so an option given to the wrong command is refused by the parser, by name; every
command fills the same namespace (:data:`DEFAULTS` names every attribute), so the rest of the tool
never asks which options a command has. Only the standard library is imported here: ``--help``,
``--version`` and shell completion must start fast.
"""

from __future__ import annotations

import argparse
import copy
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from airflow_provider_kafka_eos import PROJECT_URL, __version__

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PROG = "kafka-eos-txn"
ENV_COMMAND_CONFIG = "KAFKA_EOS_COMMAND_CONFIG"
ENV_SASL_USERNAME = "KAFKA_EOS_SASL_USERNAME"  # every secret's variable: kafka.config.SECRET_ENV_VARS
ENV_SASL_PASSWORD = "KAFKA_EOS_SASL_PASSWORD"  # noqa: S105 (the variable's name, not a password)
ENV_BOOTSTRAP = "KAFKA_BOOTSTRAP_SERVERS"
ENV_MANIFEST_BASE = "KAFKA_EOS_MANIFEST_BASE_URI"
CLI_REFERENCE_URL = f"{PROJECT_URL}/blob/main/docs/cli.md"
MANIFEST_BASE_KEY = "manifest_base_uri"  # in --command-config: ours, not a Kafka client property
CHECKPOINTS = "checkpoints"  # reads the manifest store, not Kafka
DEFAULT_TIMEOUT = "60s"
SHELLS = ("bash", "zsh", "fish", "tcsh", "powershell")

# Every attribute a parsed command line has, whichever command filled it.
DEFAULTS: dict[str, Any] = {
    "command": None,
    "page": None,
    "plain": False,
    "shell": None,
    "bootstrap_servers": None,
    "command_config": None,
    "conn_id": None,
    "transactional_id": None,
    "prefix": [],
    "state": [],
    "min_age": None,
    "producer_id": None,
    "epoch": None,
    "manifest": None,
    "manifest_base": None,
    "unprotected": False,
    "dry_run": False,
    "pipeline_id": None,
    "input_id": None,
    "json": False,
    "topic": [],
    "partition": None,
    "force": False,
    "transaction_timeout_ms": None,
    "two_phase_commit": False,
    "record_formats": None,
    "strict": False,
    "timeout": DEFAULT_TIMEOUT,
    "verbose": False,
}

SECRETS_NOTE = f"""\
secrets: put SASL/SSL settings in a client.properties file (--command-config, or ${ENV_COMMAND_CONFIG}),
or name an Airflow connection (--conn-id); ${ENV_SASL_USERNAME} / ${ENV_SASL_PASSWORD} (and
KAFKA_EOS_SSL_KEY_PASSWORD, ... see docs/cli.md) supply or override secrets. Never pass them as arguments.
manifest store: every abort reads it first and refuses ids a PREPARED manifest lists: --manifest-base,
else {MANIFEST_BASE_KEY} in --command-config (or the --conn-id connection), else ${ENV_MANIFEST_BASE}.
exit codes: 0 done, 1 failed, 2 usage. Reference: {CLI_REFERENCE_URL}
"""

EPILOG = f"""\
examples:
  {PROG} list --bootstrap-server b1:9092 --prefix etl-orders- --state Ongoing --min-age 15m
  {PROG} abort --bootstrap-server b1:9092 --manifest-base s3://bucket/manifests --prefix etl-orders- --dry-run
  {PROG} commit --conn-id kafka_eos_default --manifest s3://bucket/manifests/orders/checkpoint-000000000017.json
  {PROG} find-hanging --bootstrap-server b1:9092 --topic orders
  {PROG} runbook data-loss
  {PROG} COMMAND --help            the options of one command
  eval "$({PROG} completion bash)"  tab completion in this shell

{SECRETS_NOTE}"""

class UsageExit(SystemExit):
    """argparse refused the command line (exit 2); ``message`` is the line it printed, for ``--json``."""

    def __init__(self, message: str):
        super().__init__(EXIT_USAGE)
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse with our one-line error format (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        line = f"{message} (see {self.prog} --help). Next step: {CLI_REFERENCE_URL}"
        sys.stderr.write(f"{self.prog}: error: {line}\n")
        raise UsageExit(line)


def complete(argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv``; every :data:`DEFAULTS` attribute is set."""
    args = build_command_parser().parse_args(argv)
    for key, value in DEFAULTS.items():
        if not hasattr(args, key):
            setattr(args, key, copy.copy(value))
    return args


# -- the options, one adder each ----------------------------------------------


def _connection(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("connection")
    group.add_argument(
        "--bootstrap-server",
        "--bootstrap-servers",
        dest="bootstrap_servers",
        metavar="HOST:PORT[,...]",
        help=f"brokers to contact (default: bootstrap.servers from --command-config or --conn-id, "
        f"or ${ENV_BOOTSTRAP}); both spellings work",
    )
    group.add_argument(
        "--command-config",
        metavar="FILE",
        help="client.properties with SSL/SASL settings, as Kafka's tools take it "
        f"(default: ${ENV_COMMAND_CONFIG})",
    )
    group.add_argument(
        "--conn-id",
        metavar="CONN_ID",
        help="an Airflow connection (kafka_eos type) to take the client settings and the manifest store "
        "from; needs Apache Airflow installed and its metadata database or secrets backend reachable",
    )
    group.add_argument(
        "--timeout",
        default=DEFAULT_TIMEOUT,
        metavar="DURATION",
        help=f"deadline for the whole command, whatever the cluster does or does not answer "
        f"(default {DEFAULT_TIMEOUT}; must be positive)",
    )


def _output(p: argparse.ArgumentParser, *, strict: bool = False) -> None:
    p.add_argument("--json", action="store_true", help="print JSON (failures too: ok, error, runbook)")
    if strict:
        p.add_argument(
            "--strict",
            action="store_true",
            help="exit 1 when the principal cannot see every transaction asked for",
        )
    p.add_argument("-v", "--verbose", action="store_true", help="log the Kafka client's debug output")


def _txn_id(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument("--transactional-id", metavar="ID", help=text)


def _prefix(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument("--prefix", action="append", default=[], metavar="PREFIX", help=text + " (repeatable)")


def _state(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state",
        action="append",
        default=[],
        metavar="STATE",
        help="only transactions in this state (repeatable), e.g. Ongoing",
    )


def _min_age(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument("--min-age", metavar="DURATION", help=text)


def _pid_epoch(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument("--producer-id", type=int, metavar="N", help=f"{text}: the producer id")
    p.add_argument("--epoch", type=int, metavar="N", help=f"{text}: the producer epoch")


def _manifest(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument("--manifest", metavar="URI", help=text)


def _manifest_base(
    p: argparse.ArgumentParser, text: str = "the manifest store every abort reads first"
) -> None:
    p.add_argument(
        "--manifest-base",
        metavar="URI",
        help=f"{text} (default: {MANIFEST_BASE_KEY} in --command-config or the --conn-id connection, "
        f"or ${ENV_MANIFEST_BASE})",
    )


def _unprotected(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--unprotected",
        action="store_true",
        help="do not require the manifest store and abort what PREPARED manifests list too "
        "(their batches are lost)",
    )


def _dry_run(p: argparse.ArgumentParser, verb: str) -> None:
    p.add_argument("--dry-run", action="store_true", help=f"run every check the {verb} runs; change nothing")


def _preflight(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="output topic whose ACLs to check (repeatable)",
    )
    p.add_argument(
        "--transaction-timeout-ms",
        type=int,
        metavar="MS",
        help="the pipeline's transaction.timeout.ms, checked against the broker max",
    )
    p.add_argument(
        "--two-phase-commit",
        action="store_true",
        help="the pipeline uses KIP-939 2PC; require it and check the TWO_PHASE_COMMIT ACL",
    )
    p.add_argument(
        "--record-formats",
        metavar="FILE",
        help="JSON file: the pipeline's key/value record formats and its schema registry "
        '({"value": {"format": "avro", "schema": ...}, "registry": {"url": ...}}; a file, so the '
        "registry's credentials stay off the command line); each encoded part of each --topic is "
        "checked against the registry, read-only",
    )


def _checkpoint_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pipeline-id", metavar="ID", help="one pipeline's checkpoints")
    p.add_argument(
        "--input-id", metavar="INPUT", help="only checkpoints carrying this input (e.g. a batch name)"
    )


def _partition(p: argparse.ArgumentParser, *, required: bool) -> None:
    p.add_argument("--partition", type=int, metavar="N", required=required, help="the partition")


# -- the subcommands -----------------------------------------------------------------------------------


def _list(p: argparse.ArgumentParser) -> None:
    _prefix(p, "transactional-id prefix")
    _state(p)
    _min_age(p, "only transactions open at least this long (15m)")


def _describe(p: argparse.ArgumentParser) -> None:
    _txn_id(p, "one transaction")
    _prefix(p, "every transaction under this transactional-id prefix")


def _abort(p: argparse.ArgumentParser) -> None:
    _txn_id(p, "one transaction")
    _prefix(p, "every Ongoing transaction under this prefix (bulk abort)")
    _manifest(p, "a whole checkpoint: abort what it holds open and mark it ABORTED")
    _pid_epoch(p, "compare-and-abort (with --transactional-id)")
    _min_age(
        p, "bulk abort: only transactions open at least this long (default: the transaction timeout, 15m)"
    )
    _manifest_base(p)
    _unprotected(p)
    _dry_run(p, "abort")


def _commit(p: argparse.ArgumentParser) -> None:
    _txn_id(p, "one transaction (with --producer-id and --epoch)")
    _pid_epoch(p, "commit by resume")
    _manifest(p, "a whole checkpoint: commit every transaction it lists and mark it COMMITTED")
    _dry_run(p, "commit")


def _commit_from_manifest(p: argparse.ArgumentParser) -> None:
    _manifest(p, "the checkpoint manifest to commit")
    _dry_run(p, "commit")


def _find_hanging(p: argparse.ArgumentParser) -> None:
    _prefix(p, "transactional-id prefix")
    _min_age(p, "open at least this long (default 15m)")
    _manifest_base(p, "the manifest store, to say which transactions a PREPARED manifest will commit")
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="scan this topic's partitions instead: every open transaction there, marked hanging when "
        "its coordinator has no entry that will end it (repeatable)",
    )
    _partition(p, required=False)


def _abort_partition(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", action="append", required=True, metavar="TOPIC", help="the topic")
    _partition(p, required=True)
    _pid_epoch(p, "the hanging transaction (from find-hanging --topic; optional when it is the only one)")
    _manifest_base(p, "the manifest store, read first: a producer a PREPARED manifest lists is refused")
    _unprotected(p)
    p.add_argument(
        "--force",
        action="store_true",
        help="abort even though the coordinator still owns the transaction (normally: abort "
        "--transactional-id)",
    )
    _dry_run(p, "abort")


def _preflight_command(p: argparse.ArgumentParser) -> None:
    _prefix(p, "the pipeline's transactional-id prefix")
    _preflight(p)


def _checkpoints(p: argparse.ArgumentParser) -> None:
    _manifest_base(p, "the manifest store to list")
    _checkpoint_filters(p)


# name -> (one-line help, description, examples, options, talks to Kafka, has --strict)
_Adder = Callable[[argparse.ArgumentParser], None]
COMMANDS: dict[str, tuple[str, str, str, _Adder, bool, bool]] = {
    "list": (
        "list transactions (ListTransactions)",
        "List the transactions the coordinators know, by prefix, state and age.",
        "list --bootstrap-server b1:9092 --prefix etl-orders- --state Ongoing --min-age 15m",
        _list,
        True,
        True,
    ),
    "describe": (
        "describe transactions (DescribeTransactions)",
        "State, producer id/epoch, timeout, age and partitions of one transaction or a prefix's.",
        "describe --bootstrap-server b1:9092 --transactional-id etl-orders-3-17",
        _describe,
        True,
        False,
    ),
    "abort": (
        "abort transactions (fencing), after checking the manifest store",
        "Abort one transaction, every Ongoing one under a prefix, or a whole checkpoint. The manifest "
        "store is read first: what a PREPARED manifest lists is refused (it must commit).",
        "abort --bootstrap-server b1:9092 --manifest-base s3://bucket/manifests --prefix etl-orders- "
        "--min-age 1h --dry-run",
        _abort,
        True,
        False,
    ),
    "commit": (
        "commit a prepared transaction or a whole checkpoint (EndTxn)",
        "Commit one transaction by its producer id and epoch (commit by resume), or every transaction "
        "of a checkpoint manifest (then the manifest is marked COMMITTED).",
        "commit --bootstrap-server b1:9092 --manifest file:///data/manifests/orders/checkpoint-000000000017.json",
        _commit,
        True,
        False,
    ),
    "commit-from-manifest": (
        "commit a checkpoint manifest (same as commit --manifest)",
        "Commit every transaction a checkpoint manifest lists and mark it COMMITTED.",
        "commit-from-manifest --bootstrap-server b1:9092 --manifest s3://bucket/manifests/orders/checkpoint-000000000017.json",
        _commit_from_manifest,
        True,
        False,
    ),
    "find-hanging": (
        "transactions open too long, or open on partitions with no coordinator entry",
        "With --prefix: transactions Ongoing longer than --min-age and the partitions whose LSO they hold "
        "back. With --topic: every open transaction on the topic's partitions (DescribeProducers), "
        "marked hanging when no coordinator entry will end it (abort those with abort-partition).",
        "find-hanging --bootstrap-server b1:9092 --topic orders",
        _find_hanging,
        True,
        True,
    ),
    "abort-partition": (
        "abort a hanging transaction on one partition (KIP-664 WriteTxnMarkers, no JVM tool)",
        "Write an ABORT marker for one producer on one partition (KIP-664 WriteTxnMarkers, through "
        "kafka-python: no JVM tool), as kafka-transactions.sh abort does: "
        "for a transaction its coordinator no longer knows (find-hanging --topic names them). Refused "
        "for a producer a PREPARED manifest lists.",
        "abort-partition --bootstrap-server b1:9092 --manifest-base s3://bucket/manifests --topic orders "
        "--partition 3 --producer-id 4001 --epoch 0",
        _abort_partition,
        True,
        False,
    ),
    "preflight": (
        "what the cluster supports and which ACLs the pipeline's principal lacks",
        "Check capabilities (transaction version, 2PC, timeouts) and the ACLs a pipeline needs.",
        "preflight --bootstrap-server b1:9092 --prefix etl-orders- --topic orders",
        _preflight_command,
        True,
        False,
    ),
    CHECKPOINTS: (
        "the manifest store's checkpoints, with status and input (reads no Kafka)",
        "List the checkpoints in the manifest store: status, input, run. Reads no Kafka.",
        "checkpoints --manifest-base s3://bucket/manifests --pipeline-id orders",
        _checkpoints,
        False,
        False,
    ),
}


def build_command_parser() -> argparse.ArgumentParser:
    """``kafka-eos-txn COMMAND [options]``: one subparser per command, each with its own --help."""
    parser = _Parser(
        prog=PROG,
        description="Inspect, abort and commit the Kafka transactions of exactly-once pipelines.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)
    for name, (short, description, example, add, kafka, strict) in COMMANDS.items():
        p = sub.add_parser(
            name,
            help=short,
            description=textwrap.fill(description, 100),
            epilog=f"example:\n  {PROG} {example}\n\n{SECRETS_NOTE}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add(p)
        if kafka:
            _connection(p)
        else:
            p.add_argument(
                "--command-config", metavar="FILE", help="a client.properties holding manifest_base_uri"
            )
            p.add_argument(
                "--conn-id", metavar="CONN_ID", help="an Airflow connection holding manifest_base_uri"
            )
            p.add_argument("--timeout", default=DEFAULT_TIMEOUT, metavar="DURATION", help="deadline")
        _output(p, strict=strict)
    runbook = sub.add_parser(
        "runbook",
        help="print a runbook page (every error's 'Next step' names one)",
        description="Print a runbook page, rendered on a terminal (plain Markdown in a pipe); alone: "
        "list the pages.",
    )
    runbook.add_argument("page", nargs="?", metavar="PAGE", help="the page (e.g. data-loss)")
    runbook.add_argument(
        "--plain", action="store_true", help="print the Markdown as it is, even on a terminal"
    )
    completion = sub.add_parser(
        "completion",
        help="print the shell code for tab completion",
        description=f"Print the code that makes the shell complete {PROG}'s commands and options: "
        f'eval "$({PROG} completion bash)" (in ~/.bashrc to keep it). '
        "Needs argcomplete (installed with Airflow).",
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell")
    return parser
