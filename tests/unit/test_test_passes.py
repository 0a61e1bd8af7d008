"""``./run test``'s pass runner (scripts/test_passes.py): counts, exit code 5, the closing line."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def passes():
    spec = importlib.util.spec_from_file_location("test_passes_script", ROOT / "scripts" / "test_passes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_pass_counts_passed_failed_and_skipped(passes, tmp_path, capsys):
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_bad(): assert False\n"
        "@pytest.mark.skip(reason='needs nothing')\n"
        "def test_skipped(): pass\n"
    )
    outcome = passes.run_pass(passes.Pass("sample", "a sample"), [str(sample), "-p", "no:kafka_eos"])
    assert (outcome.passed, outcome.failed, outcome.skipped, outcome.ok) == (1, 1, 1, False)
    assert "===== pass sample: FAILED" in capsys.readouterr().out


def test_a_pass_that_selects_nothing_is_not_a_failure(passes, tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("def test_ok(): pass\n")
    outcome = passes.run_pass(passes.Pass("empty", "nothing"), [str(sample), "-k", "no_such_test"])
    assert (outcome.passed, outcome.failed, outcome.ok) == (0, 0, True)


def test_unknown_pass_names_are_refused(passes, monkeypatch):
    monkeypatch.setenv(passes.PASSES_ENV, "embedded,nope")
    with pytest.raises(SystemExit, match="unknown pass"):
        passes.selected_passes()
