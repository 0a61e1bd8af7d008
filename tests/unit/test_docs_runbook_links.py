"""Every runbook page the code sends a user to must exist.

Errors end with "Next step: docs/runbook/<page>.md"; a dangling page is a dead end for an
on-call engineer at 3 a.m., so this scans the source for every page name it can cite.
"""

from __future__ import annotations

import inspect
import pathlib
import re

from airflow_provider_kafka_eos.kafka import errors

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

SOURCE_DIRS = ("airflow_provider_kafka_eos", "dags", "scripts")
CITATION = re.compile(
    r"""runbook\s*=\s*["']([a-z0-9-]+)["']"""
    r"""|docs/runbook/([a-z0-9-]+)\.md"""
    r"""|RUNBOOK_\w+\s*=\s*["']([a-z0-9-]+)["']"""
)


def cited_pages() -> dict[str, set[str]]:
    pages: dict[str, set[str]] = {}
    for folder in SOURCE_DIRS:
        for path in (REPO_ROOT / folder).rglob("*.py"):
            for match in CITATION.finditer(path.read_text()):
                page = next(group for group in match.groups() if group)
                pages.setdefault(page, set()).add(str(path.relative_to(REPO_ROOT)))
    for _, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, errors.KafkaEosError):
            pages.setdefault(cls.default_runbook, set()).add(f"kafka/errors.py:{cls.__name__}")
    return pages


def test_the_scan_finds_the_pages_errors_cite_by_default():
    pages = cited_pages()
    assert {"data-loss", "producer-fenced", "unknown-transaction", "broker-unreachable"} <= set(pages)


def test_every_cited_runbook_page_exists():
    missing = {
        page: sorted(sources)
        for page, sources in cited_pages().items()
        if not (REPO_ROOT / "docs" / "runbook" / f"{page}.md").is_file()
    }
    assert not missing, f"runbook pages cited but missing: {missing}"
