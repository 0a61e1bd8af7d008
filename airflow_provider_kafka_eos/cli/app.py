"""``kafka-eos-txn``: parse, build the clients, run one action, print; never a traceback.

Validation and execution live in :mod:`airflow_provider_kafka_eos.kafka.operations.resolution`,
shared with the manual-resolution DAG, so both say the same thing. This module only wires the
command line (:mod:`.options`), the settings (:mod:`.settings`) and the output (:mod:`.output`)
together, and imports each heavy part (kafka-python, rich, Airflow) only once a command needs it:
``--help``, ``--version`` and completion start in a fraction of a second.

Exit codes: 0 done, 1 failed, 2 usage. Errors are one line on stderr naming the cause and the
runbook page (with ``--json``, also a JSON object on stdout); no traceback.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from airflow_provider_kafka_eos.cli.options import (
    CHECKPOINTS,
    CLI_REFERENCE_URL,
    DEFAULT_TIMEOUT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    UsageExit,
    build_command_parser,
    complete,
)
from airflow_provider_kafka_eos.cli.output import print_error, print_result, print_runbook

if TYPE_CHECKING:  # the store client stays unimported until a command needs it
    from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import StoreAccess

# How long connecting to the cluster may take at most (less when --timeout is shorter).
CONNECT_TIMEOUT_MS = 10_000


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
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    env = os.environ if env is None else env
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = complete(argv)
    except UsageExit as refused:  # argparse's own refusal: printed; with --json, as JSON on stdout too
        if "--json" in argv:
            doc = {"ok": False, "error": refused.message, "exit_code": EXIT_USAGE}
            doc.update(runbook=CLI_REFERENCE_URL, runbook_page=None)
            stdout.write(json.dumps(doc, sort_keys=True) + "\n")
        return EXIT_USAGE
    if args.command == "completion":
        return print_completion(args.shell, stdout, stderr)
    if args.command == "runbook":
        return print_runbook(args.page or "", stdout, stderr, render=False if args.plain else None)
    _quiet_client_logs(args.verbose)
    try:
        return _execute(args, env, stdout, stderr)
    except KeyboardInterrupt:
        stderr.write(f"{PROG}: interrupted\n")
        return 130


def _execute(args: Any, env: Any, stdout: TextIO, stderr: TextIO) -> int:
    """Run the action; every failure becomes one line (and a JSON object with --json)."""
    from airflow_provider_kafka_eos.kafka.errors import ConfigError, KafkaEosError, UsageError
    from airflow_provider_kafka_eos.runbook import reference

    def fail(err: Exception, code: int, runbook: str | None) -> int:
        return print_error(str(err), code, json_out=args.json, stdout=stdout, stderr=stderr, runbook=runbook)

    try:
        result = _result(args, env, stdout, stderr)
    except (UsageError, ConfigError) as err:
        return fail(err, EXIT_USAGE, err.runbook)
    except KafkaEosError as err:
        return fail(err, EXIT_FAILED, err.runbook)
    except KeyboardInterrupt:
        raise
    except Exception as err:  # one line, never a traceback; the runbook page says how to dig deeper
        first = (str(err).strip().splitlines() or [""])[0][:300]
        message = (
            f"unexpected {type(err).__name__}: {first}. Next step: {reference('troubleshooting')} "
            "(rerun with --verbose)"
        )
        return print_error(
            message, EXIT_FAILED, json_out=args.json, stdout=stdout, stderr=stderr, runbook="troubleshooting"
        )
    return print_result(result, args, stdout, stderr)


def _result(args: Any, env: Any, stdout: TextIO, stderr: TextIO) -> Any:
    """The action's ResolutionResult (raises what the action raises)."""
    from airflow_provider_kafka_eos.cli.output import ProgressBar
    from airflow_provider_kafka_eos.cli.settings import (
        airflow_connection,
        client_config_of,
        command_properties,
        manifest_base_of,
        record_formats_of,
        resolution_request_of,
        store_access_for,
    )
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.errors import UsageError
    from airflow_provider_kafka_eos.kafka.operations.resolution import run_resolution
    from airflow_provider_kafka_eos.kafka.validation import MAX_DURATION_MS, parse_duration_ms

    connection = airflow_connection(args)  # imports Airflow (seconds): before the deadline too
    # The deadline starts before anything else can wait (the imports above, a second on a loaded
    # machine, are not the cluster's time): every call below is bounded by it.
    timeout_ms = parse_duration_ms(args.timeout, what="--timeout", positive=True, max_ms=MAX_DURATION_MS)
    if timeout_ms is None:
        raise UsageError(f"--timeout must be a positive duration like 30s (default {DEFAULT_TIMEOUT})")
    deadline = time.monotonic() + timeout_ms / 1000
    path, props = command_properties(args, env)
    manifest_base = manifest_base_of(args, env, props, connection)
    if args.command == CHECKPOINTS:
        return _checkpoints(args, manifest_base, store_access_for(connection, manifest_base))
    request = resolution_request_of(args, manifest_base)
    formats = record_formats_of(args)  # preflight only (settings.py refuses it elsewhere)
    access = store_access_for(connection, request.manifest_uri or request.manifest_base_uri)
    if not request.protect:
        stderr.write(
            f"{PROG}: WARNING: --unprotected: transactions listed in PREPARED manifests will be "
            "aborted too; their checkpoints' batches are lost\n"
        )
    config = client_config_of(args, env, path, props, connection)
    interactive = stderr.isatty() and not args.json
    with (
        TransactionAdmin(
            config,
            connect_timeout_ms=min(timeout_ms, CONNECT_TIMEOUT_MS),
            request_timeout_ms=timeout_ms,
            retry_timeout_ms=timeout_ms,
            deadline=deadline,
        ) as admin,
        ProgressBar(interactive, stderr) as bar,
    ):
        return run_resolution(admin, request, progress=bar if interactive else None, config=config,
                              access=access, record_formats=formats)


def _checkpoints(args: Any, manifest_base: str | None, access: StoreAccess) -> Any:
    """``checkpoints``: the store's checkpoints (status, input, run); reads no Kafka and changes nothing,
    so its errors say what is wrong with the store and nothing about aborts."""
    from airflow_provider_kafka_eos.cli.options import ENV_MANIFEST_BASE, MANIFEST_BASE_KEY
    from airflow_provider_kafka_eos.kafka.checkpoints.listing import COLUMNS, checkpoint_rows, writers_note
    from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
    from airflow_provider_kafka_eos.kafka.errors import ManifestStoreError
    from airflow_provider_kafka_eos.kafka.operations.resolution_request import ResolutionResult
    from airflow_provider_kafka_eos.kafka.validation import validate_input_id, validate_pipeline_id

    if not (manifest_base or "").strip():
        raise ManifestStoreError(
            f"no manifest store is configured: {CHECKPOINTS} lists a store's checkpoints. Pass "
            f"--manifest-base URI, or set {MANIFEST_BASE_KEY} in --command-config or the Airflow "
            f"connection, or ${ENV_MANIFEST_BASE}"
        )
    pipeline_id = validate_pipeline_id(args.pipeline_id, field="--pipeline-id") if args.pipeline_id else None
    input_id = validate_input_id(args.input_id, field="--input-id") if args.input_id is not None else None
    store = ManifestStore.configured(manifest_base, source="--manifest-base / manifest_base_uri",
                                     access=access)
    rows = checkpoint_rows(store, pipeline_id=pipeline_id, input_id=input_id)
    summary = f"{len(rows)} checkpoint(s) in {store.base_uri}{writers_note(store, pipeline_id)}"
    return ResolutionResult(rows, summary, True, COLUMNS)


def print_completion(shell: str, stdout: TextIO, stderr: TextIO) -> int:
    """``completion SHELL``: argcomplete's registration code for this program."""
    try:
        import argcomplete
    except ImportError:
        stderr.write(
            f"{PROG}: error: shell completion needs the argcomplete package (pip install argcomplete; "
            "Airflow installs it)\n"
        )
        return EXIT_FAILED
    stdout.write(argcomplete.shellcode([PROG], shell=shell))
    return EXIT_OK


def _autocomplete() -> None:
    """Answer the shell's completion request (``_ARGCOMPLETE`` set by the code ``completion``
    printed) and exit; a no-op otherwise, checked before anything is imported."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        import argcomplete
    except ImportError:
        return
    argcomplete.autocomplete(build_command_parser())


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``kafka-eos-txn``)."""
    _autocomplete()
    try:
        code = run(argv)
    except BrokenPipeError:  # `kafka-eos-txn runbook | head`: the reader left, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_OK
    raise SystemExit(code)
