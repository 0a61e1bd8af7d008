"""The operations runbook, shipped inside the package so every "Next step" works after a pip install.

The pages live in ``docs/runbook/`` (the one copy; ``runbook_pages/`` in this package is a link
to it that the build follows, so wheels and sdists carry the files). An error names a page in two
forms, one for a shell on the worker and one for a browser::

    Next step: kafka-eos-txn runbook data-loss (https://.../docs/runbook/data-loss.md)

No Airflow, Spark or Kafka import here: Spark executors and the CLI use it.
"""

from __future__ import annotations

import re
from importlib import resources

from airflow_provider_kafka_eos import PROJECT_URL

__all__ = ["PAGES_URL", "page_url", "pages", "read", "reference", "title"]

PAGES_URL = f"{PROJECT_URL}/blob/main/docs/runbook"
INDEX = "README"
_PAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def page_url(page: str) -> str:
    """The page in a browser."""
    return f"{PAGES_URL}/{page}.md" if page != INDEX else f"{PAGES_URL}/"


def reference(page: str) -> str:
    """How a message names a page: the command that prints it, then its URL."""
    return f"kafka-eos-txn runbook {page} ({page_url(page)})"


def _folder() -> resources.abc.Traversable:
    return resources.files("airflow_provider_kafka_eos") / "runbook_pages"


def pages() -> list[str]:
    """Every page name, sorted (the index, ``README``, excluded)."""
    return sorted(
        entry.name[: -len(".md")]
        for entry in _folder().iterdir()
        if entry.name.endswith(".md") and entry.name != f"{INDEX}.md"
    )


def read(page: str) -> str:
    """The page's Markdown; ``KeyError`` naming the known pages for an unknown one."""
    name = page.strip().removesuffix(".md")
    if name.lower() in ("", "index", "readme"):
        name = INDEX
    if name != INDEX and (not _PAGE_NAME.match(name) or name not in pages()):
        raise KeyError(f"no runbook page {page!r}; pages: {', '.join(pages())}")
    return (_folder() / f"{name}.md").read_text(encoding="utf-8")


def title(page: str) -> str:
    """The page's first heading, for listings."""
    for line in read(page).splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return page
