"""Every runbook page the code sends a user to must exist, and must reach a user who only pip-installed.

Errors end with "Next step: kafka-eos-txn runbook <page> (<url>/<page>.md)"; a dangling page is
a dead end for an on-call engineer at 3 a.m., so this scans the source for every page name it can
cite. The pages ship inside the package (``runbook_pages/`` links to ``docs/runbook/``, the one
copy), and the built wheel is checked to carry every one of them.
"""

from __future__ import annotations

import inspect
import io
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest

from airflow_provider_kafka_eos import PROJECT_URL, cli
from airflow_provider_kafka_eos.kafka import errors

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
RUNBOOK_DIR = REPO_ROOT / "docs" / "runbook"

SOURCE_DIRS = ("airflow_provider_kafka_eos", "dags", "scripts")
CITATION = re.compile(
    r"""runbook\s*=\s*["']([a-z0-9-]+)["']"""
    r"""|docs/runbook/([a-z0-9-]+)\.md"""
    r"""|kafka-eos-txn runbook ([a-z0-9-]+)"""
    r"""|runbook_reference\(["']([a-z0-9-]+)["']\)"""
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
        if not (RUNBOOK_DIR / f"{page}.md").is_file()
    }
    assert not missing, f"runbook pages cited but missing: {missing}"


def test_an_error_names_its_page_as_a_command_and_as_a_url():
    text = str(errors.DataLossError("gone", transactional_id="t-1"))
    assert text == (
        "t-1: gone. Next step: kafka-eos-txn runbook data-loss "
        f"({PROJECT_URL}/blob/main/docs/runbook/data-loss.md)"
    )


def test_the_cli_lists_and_prints_the_pages_the_package_carries():
    out, err = io.StringIO(), io.StringIO()
    assert cli.run(["runbook"], stdout=out, stderr=err) == 0
    listed = [line.split()[0] for line in out.getvalue().splitlines()[1:]]
    assert listed == sorted(p.stem for p in RUNBOOK_DIR.glob("*.md") if p.stem != "README")
    out = io.StringIO()
    assert cli.run(["runbook", "data-loss"], stdout=out, stderr=err) == 0
    assert out.getvalue() == (RUNBOOK_DIR / "data-loss.md").read_text()
    assert cli.run(["runbook", "no-such-page"], stdout=io.StringIO(), stderr=err) == 2
    assert "no runbook page 'no-such-page'; pages: broker-unreachable," in err.getvalue()


@pytest.mark.timeout(300)
def test_the_wheel_ships_every_runbook_page(tmp_path):
    """Before: "Next step: docs/runbook/X.md" named a file a pip install does not have."""
    uv = pathlib.Path(sys.executable).with_name("uv")  # ./run installs it into the venv
    command = (
        [str(uv), "build", "--wheel", "-q", "-o", str(tmp_path), str(REPO_ROOT)]
        if uv.exists()
        else [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO_ROOT)]
    )
    built = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    pages_dir = "airflow_provider_kafka_eos/runbook_pages/"
    shipped = {n.rsplit("/", 1)[-1] for n in names if n.startswith(pages_dir)}
    assert shipped == {p.name for p in RUNBOOK_DIR.glob("*.md")}
    assert "airflow_provider_kafka_eos/runbook.py" in names
    # The operators' console's bundle (built, not committed: ./run test runs ./run console-build first).
    assert "airflow_provider_kafka_eos/ui/console_dist/console.js" in names, (
        "the wheel has no console bundle: run ./run console-build before building it")
    assert not any(n.startswith("testing/kafka_eos_testing/") and "pytest11" in n for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "pytest11" not in zipfile.ZipFile(wheel).read(entry_points).decode()
