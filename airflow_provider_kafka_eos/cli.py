"""``kafka-eos-txn``: the operator's tool for transactions a pipeline left behind.

The interface of the seed tool (``--action abort|commit``, ``--bootstrap-servers``,
``--transactional-id``, ``--producer-id``, ``--epoch``, ``--command-config``) plus list,
describe, find-hanging, commit-from-manifest and preflight. Validation and execution live in
:mod:`airflow_provider_kafka_eos.kafka.operations.resolution`, shared with the manual-resolution DAG, so
both say the same thing. This module only parses arguments, builds the client configuration
(secrets come from the ``--command-config`` file or the environment, never from the command
line, where ``ps`` would show them) and renders results.

Exit codes: 0 done, 1 failed, 2 usage. Errors are one line on stderr naming the cause and
the runbook page; no traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from airflow_provider_kafka_eos import PROJECT_URL
from airflow_provider_kafka_eos.runbook import reference as runbook_reference

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PROG = "kafka-eos-txn"
ENV_COMMAND_CONFIG = "KAFKA_EOS_COMMAND_CONFIG"
ENV_SASL_USERNAME = "KAFKA_EOS_SASL_USERNAME"  # every secret's variable: kafka.config.SECRET_ENV_VARS
ENV_SASL_PASSWORD = "KAFKA_EOS_SASL_PASSWORD"  # noqa: S105 (the variable's name, not a password)
ENV_BOOTSTRAP = "KAFKA_BOOTSTRAP_SERVERS"
CLI_REFERENCE_URL = f"{PROJECT_URL}/blob/main/docs/cli.md"
ENV_MANIFEST_BASE = "KAFKA_EOS_MANIFEST_BASE_URI"
MANIFEST_BASE_KEY = "manifest_base_uri"  # in --command-config: ours, not a Kafka client property
CHECKPOINTS = "checkpoints"  # an action of the CLI only: it reads the manifest store, not Kafka
DEFAULT_TIMEOUT = "60s"
# How long connecting to the cluster may take at most (less when --timeout is shorter).
CONNECT_TIMEOUT_MS = 10_000

EPILOG = f"""\
examples:
  {PROG} --action list --bootstrap-servers b1:9092 --prefix etl-orders- --state Ongoing --min-age 15m
  {PROG} --action describe --bootstrap-servers b1:9092 --transactional-id etl-orders-3-17
  {PROG} --action abort --bootstrap-servers b1:9092 --manifest-base s3://bucket/manifests \\
      --transactional-id etl-orders-3-17
  {PROG} --action abort --bootstrap-servers b1:9092 --manifest-base s3://bucket/manifests \\
      --transactional-id etl-orders-3-17 --producer-id 4001 --epoch 0      (compare-and-abort)
  {PROG} --action abort --bootstrap-servers b1:9092 --manifest-base s3://bucket/manifests \\
      --prefix etl-orders- --min-age 1h --dry-run
  {PROG} --action abort --bootstrap-servers b1:9092 \\
      --manifest s3://bucket/manifests/orders/checkpoint-000000000017.json   (a whole checkpoint)
  {PROG} --action commit --bootstrap-servers b1:9092 --transactional-id etl-orders-3-17 \\
      --producer-id 4001 --epoch 0
  {PROG} --action commit --bootstrap-servers b1:9092 --manifest file:///data/manifests/orders/checkpoint-000000000017.json
  {PROG} --action find-hanging --bootstrap-servers b1:9092 --prefix etl-orders-
  {PROG} --action preflight --bootstrap-servers b1:9092 --prefix etl-orders- --topic orders
  {PROG} --runbook                 list the runbook pages (they ship with the package)
  {PROG} --runbook data-loss       print one page

secrets: put SASL/SSL settings in a client.properties file (--command-config, or ${ENV_COMMAND_CONFIG});
${ENV_SASL_USERNAME} / ${ENV_SASL_PASSWORD} (and KAFKA_EOS_SSL_KEY_PASSWORD, ... see docs/cli.md)
supply or override secrets. Never pass them as arguments.
manifest store: every abort reads it first and refuses ids a PREPARED manifest lists: --manifest-base,
else {MANIFEST_BASE_KEY} in --command-config, else ${ENV_MANIFEST_BASE}. --unprotected goes around it.
exit codes: 0 done, 1 failed, 2 usage. Reference: {CLI_REFERENCE_URL}
"""


class _Parser(argparse.ArgumentParser):
    """argparse with our one-line error format (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{PROG}: error: {message} (see {PROG} --help). Next step: {CLI_REFERENCE_URL}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    from airflow_provider_kafka_eos.kafka.operations.resolution import ACTIONS

    parser = _Parser(
        prog=PROG,
        description="Inspect, abort and commit the Kafka transactions of exactly-once pipelines.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--action",
        choices=(*ACTIONS, CHECKPOINTS),
        help=f"what to do (required, unless --runbook); {CHECKPOINTS}: the manifest store's checkpoints "
        "with their status and input (reads no Kafka)",
    )
    parser.add_argument(
        "--runbook",
        nargs="?",
        const="",
        metavar="PAGE",
        help="print a runbook page (every error's 'Next step' names one); alone: list the pages",
    )
    parser.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT[,...]",
        help=f"brokers to contact (default: bootstrap.servers from --command-config, or ${ENV_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help=f"client.properties with SSL/SASL settings (default: ${ENV_COMMAND_CONFIG})",
    )
    parser.add_argument("--transactional-id", metavar="ID", help="one transaction (describe, abort, commit)")
    parser.add_argument(
        "--prefix",
        action="append",
        default=[],
        metavar="PREFIX",
        help="transactional-id prefix (repeatable): list, describe, bulk abort, find-hanging",
    )
    parser.add_argument(
        "--state",
        action="append",
        default=[],
        metavar="STATE",
        help="only transactions in this state (repeatable), e.g. Ongoing",
    )
    parser.add_argument(
        "--min-age",
        metavar="DURATION",
        help="only transactions open at least this long (15m); a bulk abort defaults to the "
        "transaction timeout (15m)",
    )
    _add_checkpoint_args(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _add_preflight_args(parser)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="list/find-hanging: exit 1 when the principal cannot see every transaction asked for",
    )
    parser.add_argument(
        "--timeout",
        default=DEFAULT_TIMEOUT,
        metavar="DURATION",
        help=f"deadline for the whole command, whatever the cluster does or does not answer "
        f"(default {DEFAULT_TIMEOUT}; must be positive)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log the Kafka client's debug output")
    return parser


def _add_preflight_args(parser: argparse.ArgumentParser) -> None:
    """What preflight checks: the output topics, the transaction timeout, 2PC."""
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="preflight: output topic whose ACLs to check (repeatable)",
    )
    parser.add_argument(
        "--transaction-timeout-ms",
        type=int,
        metavar="MS",
        help="preflight: the pipeline's transaction.timeout.ms, checked against the broker max",
    )
    parser.add_argument(
        "--two-phase-commit",
        action="store_true",
        help="preflight: the pipeline uses KIP-939 2PC; require it and check the TWO_PHASE_COMMIT ACL",
    )


def _add_checkpoint_args(parser: argparse.ArgumentParser) -> None:
    """The options about checkpoints and the safety of an abort (the manifest store, dry runs)."""
    parser.add_argument(
        "--producer-id", type=int, metavar="N", help="commit / compare-and-abort: the producer id"
    )
    parser.add_argument(
        "--epoch", type=int, metavar="N", help="commit / compare-and-abort: the producer epoch"
    )
    parser.add_argument(
        "--manifest",
        metavar="URI",
        help="one checkpoint manifest: commit commits it; abort aborts what it holds open and marks "
        "it ABORTED",
    )
    parser.add_argument(
        "--manifest-base",
        metavar="URI",
        help=f"the manifest store every abort reads first (default: {MANIFEST_BASE_KEY} in --command-config, "
        f"or ${ENV_MANIFEST_BASE})",
    )
    parser.add_argument(
        "--unprotected",
        action="store_true",
        help="abort: do not require the manifest store and abort ids of PREPARED manifests too "
        "(their batches are lost)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="show what abort/commit would do; change nothing"
    )
    parser.add_argument("--pipeline-id", metavar="ID", help=f"{CHECKPOINTS}: one pipeline's checkpoints")
    parser.add_argument("--input-id", metavar="INPUT",
                        help=f"{CHECKPOINTS}: only checkpoints carrying this input (e.g. a batch name)")


def _properties(args: argparse.Namespace, env: Any) -> tuple[str | None, dict[str, str]]:
    """The --command-config file (or env) parsed, and its path."""
    from airflow_provider_kafka_eos.kafka.config import read_properties_file

    path = args.command_config or env.get(ENV_COMMAND_CONFIG)
    return path, (read_properties_file(path) if path else {})


def _client_config(
    args: argparse.Namespace, env: Any, path: str | None = None, props: dict[str, str] | None = None
) -> Any:
    """--command-config (or its env var) + --bootstrap-servers + secrets from the environment.

    The parts combine: ``--bootstrap-servers`` wins over the file's ``bootstrap.servers``,
    ``$KAFKA_BOOTSTRAP_SERVERS`` fills in when neither has one, and every secret the
    environment supplies (``KAFKA_EOS_SASL_PASSWORD``...; ``config.SECRET_ENV_VARS``) wins over
    the file, so a file may leave the password out. The file's ``manifest_base_uri`` is ours
    (the manifest store), not a client property.
    """
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig, settings_from_env
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    if props is None:
        path, props = _properties(args, env)

    overrides: dict[str, Any] = settings_from_env(env)
    if args.bootstrap_servers:
        overrides["bootstrap.servers"] = args.bootstrap_servers
    defaults = {"bootstrap.servers": env[ENV_BOOTSTRAP]} if env.get(ENV_BOOTSTRAP) else {}
    if path:
        client = {k: v for k, v in props.items() if k != MANIFEST_BASE_KEY}
        return KafkaClientConfig.from_properties(
            client, source=str(path), overrides=overrides, defaults=defaults
        )
    settings = {**defaults, **overrides}
    if "bootstrap.servers" not in settings:
        raise UsageError("--bootstrap-servers is required (or bootstrap.servers in --command-config)")
    return KafkaClientConfig.from_mapping(settings, source="command line")


def _manifest_base(args: argparse.Namespace, env: Any, props: dict[str, str]) -> str | None:
    """--manifest-base, else the key in --command-config, else the environment (one store)."""
    return args.manifest_base or props.get(MANIFEST_BASE_KEY) or env.get(ENV_MANIFEST_BASE) or None


def _checkpoints(args: argparse.Namespace, manifest_base: str | None) -> Any:
    """``--action checkpoints``: the store's checkpoints (status, input, run); reads no Kafka."""
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import ManifestStore
    from airflow_provider_kafka_eos.kafka.checkpoints.listing import COLUMNS, checkpoint_rows
    from airflow_provider_kafka_eos.kafka.operations.resolution import ResolutionResult

    store = ManifestStore.configured(manifest_base, source="--manifest-base / manifest_base_uri")
    rows = checkpoint_rows(store, pipeline_id=args.pipeline_id, input_id=args.input_id)
    return ResolutionResult(rows, f"{len(rows)} checkpoint(s) in {store.base_uri}", True, COLUMNS)


def _request(args: argparse.Namespace, manifest_base: str | None = None) -> Any:
    from airflow_provider_kafka_eos.kafka.errors import UsageError
    from airflow_provider_kafka_eos.kafka.operations.resolution import ResolutionRequest
    from airflow_provider_kafka_eos.kafka.validation import parse_duration_ms

    if (args.pipeline_id or args.input_id) and args.action != CHECKPOINTS:
        raise UsageError(f"--pipeline-id and --input-id apply to --action {CHECKPOINTS} only")
    if args.manifest and args.action not in ("commit", "commit-from-manifest", "abort"):
        raise UsageError(f"--manifest does not apply to --action {args.action}")
    if args.unprotected and args.action != "abort":
        raise UsageError("--unprotected applies to --action abort only")
    if args.strict and args.action not in ("list", "find-hanging"):
        raise UsageError("--strict applies to --action list and find-hanging only")
    preflight_only = bool(args.topic) or args.transaction_timeout_ms is not None
    if preflight_only and args.action != "preflight":
        raise UsageError("--topic and --transaction-timeout-ms apply to --action preflight only")
    return ResolutionRequest(
        action=args.action,
        transactional_id=args.transactional_id,
        producer_id=args.producer_id,
        epoch=args.epoch,
        prefixes=tuple(args.prefix),
        states=tuple(args.state),
        min_age_ms=parse_duration_ms(args.min_age),
        manifest_uri=args.manifest,
        dry_run=args.dry_run,
        manifest_base_uri=manifest_base,
        protect=not args.unprotected,
        topics=tuple(args.topic),
        transaction_timeout_ms=args.transaction_timeout_ms,
        two_phase_commit=args.two_phase_commit,
    ).validate()


def render_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Plain aligned columns (stable for scripts that grep, readable for people)."""
    columns = list(columns) or (list(rows[0]) if rows else [])
    if not rows:
        return "(none)"
    cells = [[("" if row.get(c) is None else str(row.get(c))) for c in columns] for row in rows]
    widths = [max(len(c), *(len(line[i]) for line in cells)) for i, c in enumerate(columns)]
    header = "  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))
    lines = [header.rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in cells]
    return "\n".join(lines)


class _ProgressBar:
    """A rich progress bar on a terminal; nothing otherwise (pipes and CI logs stay clean)."""

    def __init__(self, enabled: bool, stream: TextIO):
        self._progress = None
        self._task = None
        if enabled:
            from rich.console import Console
            from rich.progress import Progress

            self._progress = Progress(console=Console(file=stream), transient=True)

    def __enter__(self) -> _ProgressBar:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, done: int, total: int, label: str) -> None:
        if self._progress is None:
            return
        if self._task is None:
            self._task = self._progress.add_task(label, total=total)
        self._progress.update(self._task, completed=done, total=total, description=label)


def _quiet_client_logs(verbose: bool) -> None:
    # kafka-python logs connection retries at WARNING; with no handler configured Python's
    # last-resort handler would print them to stderr, burying our one-line error.
    if verbose:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    else:
        logging.getLogger("kafka").setLevel(logging.CRITICAL)


def run(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    env: Any = None,
) -> int:
    """The CLI without ``sys.exit`` (tests and wrappers call this)."""
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.errors import ConfigError, KafkaEosError, UsageError
    from airflow_provider_kafka_eos.kafka.operations.resolution import run_resolution

    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    env = os.environ if env is None else env
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.runbook is not None:
        return print_runbook(args.runbook, stdout, stderr)
    if not args.action:
        parser.error("the following arguments are required: --action")
    _quiet_client_logs(args.verbose)
    try:
        from airflow_provider_kafka_eos.kafka.validation import MAX_DURATION_MS, parse_duration_ms

        # The deadline starts before anything else can wait: every call below is bounded by it.
        timeout_ms = parse_duration_ms(args.timeout, what="--timeout", positive=True, max_ms=MAX_DURATION_MS)
        if timeout_ms is None:
            raise UsageError(f"--timeout must be a positive duration like 30s (default {DEFAULT_TIMEOUT})")
        deadline = time.monotonic() + timeout_ms / 1000
        path, props = _properties(args, env)
        if args.action == CHECKPOINTS:
            return _print_result(_checkpoints(args, _manifest_base(args, env, props)), args, stdout, stderr)
        request = _request(args, _manifest_base(args, env, props))
        if not request.protect:
            stderr.write(
                f"{PROG}: WARNING: --unprotected: transactions listed in PREPARED manifests will be "
                "aborted too; their checkpoints' batches are lost\n"
            )
        config = _client_config(args, env, path, props)
        interactive = stdout.isatty() and not args.json
        with (
            TransactionAdmin(
                config,
                connect_timeout_ms=min(timeout_ms, CONNECT_TIMEOUT_MS),
                request_timeout_ms=timeout_ms,
                retry_timeout_ms=timeout_ms,
                deadline=deadline,
            ) as admin,
            _ProgressBar(interactive, stderr) as bar,
        ):
            result = run_resolution(admin, request, progress=bar, config=config)
    except (UsageError, ConfigError) as err:
        stderr.write(f"{PROG}: error: {err}\n")
        return EXIT_USAGE
    except KafkaEosError as err:
        stderr.write(f"{PROG}: error: {err}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        stderr.write(f"{PROG}: interrupted\n")
        return 130
    except Exception as err:  # one line, never a traceback; the runbook page says how to dig deeper
        first = (str(err).strip().splitlines() or [""])[0][:300]
        stderr.write(
            f"{PROG}: error: unexpected {type(err).__name__}: {first}. "
            f"Next step: {runbook_reference('troubleshooting')} (rerun with --verbose)\n"
        )
        return EXIT_FAILED
    return _print_result(result, args, stdout, stderr)


def _print_result(result: Any, args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """The result as a table (or JSON with --json), its warnings on stderr; the exit code."""
    if args.json:
        stdout.write(json.dumps(result.to_dict(), sort_keys=True, default=str) + "\n")
    else:
        stdout.write(render_table(result.rows, result.columns) + "\n")
        stdout.write(result.summary + "\n")
    for warning in result.warnings:
        stderr.write(f"{PROG}: warning: {warning}. Next step: {runbook_reference('missing-acl')}\n")
    if result.warnings and args.strict:
        return EXIT_FAILED
    return EXIT_OK if result.ok else EXIT_FAILED


def print_runbook(page: str, stdout: TextIO, stderr: TextIO) -> int:
    """``--runbook PAGE`` prints the page (Markdown); ``--runbook`` alone lists the pages."""
    from airflow_provider_kafka_eos import runbook

    if not page:
        names = runbook.pages()
        width = max(map(len, names))
        index = runbook.page_url(runbook.INDEX)
        stdout.write(f"Runbook pages ({PROG} --runbook PAGE prints one; online: {index}):\n")
        stdout.writelines(f"  {name.ljust(width)}  {runbook.title(name)}\n" for name in names)
        return EXIT_OK
    try:
        text = runbook.read(page)
    except KeyError as err:
        stderr.write(f"{PROG}: error: {err.args[0]}\n")
        return EXIT_USAGE
    stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``kafka-eos-txn``)."""
    try:
        code = run(argv)
    except BrokenPipeError:  # `kafka-eos-txn --runbook | head`: the reader left, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_OK
    raise SystemExit(code)


if __name__ == "__main__":
    main()
