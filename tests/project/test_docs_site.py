"""The documentation site builds with ``mkdocs build --strict``: every warning fails it (a broken
link or anchor between pages, a page missing from the nav, a docstring the API reference cannot
read). ``mkdocs.yml`` at the repository root configures it; the build log is attached on failure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_docs_site_builds_without_a_warning(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    assert "WARNING" not in log, log
    site = tmp_path / "site"
    # the API reference was generated from the docstrings, and the CLI page carries its transcript
    assert "TransactionAdmin" in (site / "reference" / "admin" / "index.html").read_text()
    assert "Transcript" in (site / "cli" / "index.html").read_text()
    assert (site / "changelog" / "index.html").is_file()
