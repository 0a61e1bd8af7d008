"""What ``kafka-eos-txn`` prints: tables, JSON, one-line errors (JSON ones with ``--json``), live
progress on a terminal, and runbook pages rendered with rich.

Scripts read stdout: a table (stable columns, greppable) or, with ``--json``, one JSON object,
also when the command failed (``{"ok": false, "error": ..., "runbook": ...}``). People read
stderr: the one-line error with its runbook page, warnings, and a progress bar while a commit or
abort runs (only on a terminal; pipes and CI logs stay clean).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any, TextIO

from airflow_provider_kafka_eos.cli.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE, PROG


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


class ProgressBar:
    """A rich progress bar on a terminal; nothing otherwise (pipes and CI logs stay clean).

    Called as ``bar(done, total, label)`` from the admin's lane threads, once per answer; rich's
    ``Progress`` is thread-safe and refreshes on its own clock, so a burst of answers costs nothing.
    """

    def __init__(self, enabled: bool, stream: TextIO):
        self._progress: Any = None
        self._task: Any = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(file=stream),
                transient=True,
            )

    def __enter__(self) -> ProgressBar:
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


def print_result(result: Any, args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """The result as a table (or JSON with --json), its warnings on stderr; the exit code."""
    from airflow_provider_kafka_eos.runbook import reference

    if args.json:
        stdout.write(json.dumps(result.to_dict(), sort_keys=True, default=str) + "\n")
    else:
        stdout.write(render_table(result.rows, result.columns) + "\n")
        stdout.write(result.summary + "\n")
    for warning in result.warnings:
        stderr.write(f"{PROG}: warning: {warning}. Next step: {reference('missing-acl')}\n")
    if result.warnings and args.strict:
        return EXIT_FAILED
    return EXIT_OK if result.ok else EXIT_FAILED


def print_error(
    message: str, code: int, *, json_out: bool, stdout: TextIO, stderr: TextIO, runbook: str | None = None
) -> int:
    """One line on stderr; with ``--json`` also ``{"ok": false, "error", "runbook", "exit_code"}`` on
    stdout, so a script that parses stdout is never left with nothing. Returns ``code``."""
    stderr.write(f"{PROG}: error: {message}\n")
    if json_out:
        from airflow_provider_kafka_eos import runbook as pages

        doc = {
            "ok": False,
            "error": message,
            "runbook": pages.page_url(runbook) if runbook else None,
            "runbook_page": runbook,
            "exit_code": code,
        }
        stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    return code


def print_runbook(page: str, stdout: TextIO, stderr: TextIO, *, render: bool | None = None) -> int:
    """``runbook PAGE`` prints the page; ``runbook`` alone lists the pages.

    On a terminal the Markdown is rendered with rich (headings, tables, code blocks); in a pipe, or
    with ``render=False`` (``--plain``), it is printed as it is, for ``grep`` and ``less``.
    """
    from airflow_provider_kafka_eos import runbook

    if not page:
        names = runbook.pages()
        width = max(map(len, names))
        index = runbook.page_url(runbook.INDEX)
        stdout.write(f"Runbook pages ({PROG} runbook PAGE prints one; online: {index}):\n")
        stdout.writelines(f"  {name.ljust(width)}  {runbook.title(name)}\n" for name in names)
        return EXIT_OK
    try:
        text = runbook.read(page)
    except KeyError as err:
        stderr.write(f"{PROG}: error: {err.args[0]}\n")
        return EXIT_USAGE
    if render is None:
        render = stdout.isatty()
    if render:
        from rich.console import Console
        from rich.markdown import Markdown

        Console(file=stdout, force_terminal=True).print(Markdown(text))
        return EXIT_OK
    stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK
