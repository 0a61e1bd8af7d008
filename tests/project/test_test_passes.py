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


def test_a_failing_non_blocking_pass_neither_counts_nor_fails_the_run(passes):
    blocking = passes.Outcome("embedded", passed=3, skipped=1)
    still_red = passes.Outcome("apache", passed=5, failed=2, ok=False, blocking=False)
    line, code = passes.closing_line([blocking, still_red], ruff_failed=False)
    assert (line, code) == ("3 passed, 0 failed, 1 skipped", 0)


def test_a_failing_blocking_pass_or_ruff_fails_the_run(passes):
    red = passes.Outcome("cluster", passed=3, failed=1, ok=False)
    assert passes.closing_line([red], ruff_failed=False) == ("3 passed, 1 failed, 0 skipped", 1)
    green = passes.Outcome("embedded", passed=3)
    assert passes.closing_line([green], ruff_failed=True) == ("3 passed, 1 failed, 0 skipped", 1)
    stopped = passes.Outcome("spark35", passed=2, ok=False)  # stopped at its limit: no test failed
    assert passes.closing_line([stopped], ruff_failed=False)[1] == 1


def test_a_pass_environment_is_made_before_the_pass_and_used_by_it(passes, tmp_path):
    """Environments are started at once (beside earlier passes) and each pass waits for its own."""
    made = []

    def make() -> str:
        made.append("made")
        return sys.executable

    pass_with_env = passes.Pass("own-env", "its own interpreter", python=make)
    plain = passes.Pass("plain", "this interpreter")
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        environments = passes.prepare_environments([plain, pass_with_env], pool)
        assert set(environments) == {"own-env"}
        assert environments["own-env"].result(timeout=30) == sys.executable
    assert made == ["made"]
    sample = tmp_path / "test_sample.py"
    sample.write_text("def test_ok(): pass\n")
    outcome = passes.run_pass(pass_with_env, [str(sample)], environments["own-env"])
    assert (outcome.passed, outcome.ok) == (1, True)
    assert made == ["made"], "the pass used the environment made in advance, not a second one"


def test_the_soak_is_a_blocking_bounded_three_minute_pass_with_a_printed_replayable_seed(passes, monkeypatch):
    monkeypatch.delenv("KAFKA_EOS_SOAK_SEED", raising=False)
    [soak] = [p for p in passes.PASSES if p.name == "soak"]
    assert soak.blocking and soak.time_limit_s is not None
    assert soak.env["KAFKA_EOS_TEST_KAFKA"] == "apache3" and soak.env["KAFKA_EOS_SOAK_MINUTES"] == "3"
    assert soak.env["KAFKA_EOS_SOAK_SPARK"] == "local"
    # -s: the seed, the output folder and the checker's result reach CI's log as they are printed
    assert {"-s", "tests/system/soak/test_soak.py"} <= set(soak.args) and soak.args[1:3] == ("-m", "soak")
    # the test's own timeout (its finally stops every server) comes before the pass's limit
    [timeout] = [a for a in soak.args if a.startswith("timeout=")]
    assert 3 * 60 < int(timeout.removeprefix("timeout=")) < soak.time_limit_s

    today = passes._script("soak").daily_seed()
    assert 20000101 <= today <= 99991231
    fresh = passes._soak_pass()
    assert fresh.env["KAFKA_EOS_SOAK_SEED"] == str(today)
    assert f"--seed {today}" in fresh.description  # the replay command, printed with the pass's name
    monkeypatch.setenv("KAFKA_EOS_SOAK_SEED", "4242")
    assert passes._soak_pass().env["KAFKA_EOS_SOAK_SEED"] == "4242"  # a red run's seed, replayed
    monkeypatch.setenv("KAFKA_EOS_SOAK_SEED", "yesterday")
    with pytest.raises(SystemExit, match="KAFKA_EOS_SOAK_SEED='yesterday' is not a seed"):
        passes._soak_pass()


def test_the_soak_script_and_the_soak_pass_run_the_same_test_the_same_way(passes):
    soak = passes._script("soak")
    env = soak.environment(minutes=5, seed=7)
    assert env == {"KAFKA_EOS_TEST_KAFKA": "apache3", "KAFKA_EOS_SOAK_MINUTES": "5",
                   "KAFKA_EOS_SOAK_FAULT_EVERY_S": "4,12", "KAFKA_EOS_SOAK_SPARK": "local",
                   "KAFKA_EOS_SOAK_ACTIVE_RUNS": "1", "KAFKA_EOS_SOAK_STORE": "file",
                   "KAFKA_EOS_SOAK_EXECUTOR": "local", "KAFKA_EOS_SOAK_INPUT": "files",
                   "KAFKA_EOS_SOAK_SEED": "7"}
    assert "KAFKA_EOS_SOAK_SEED" not in soak.environment(minutes=5, seed=None)  # the test draws one
    assert soak.pytest_arguments(900) == ["-s", "-m", "soak", "tests/system/soak/test_soak.py",
                                          "-o", "timeout=900"]
    from datetime import datetime, timezone

    assert soak.daily_seed(datetime(2026, 11, 26, 23, 59, tzinfo=timezone.utc)) == 20261126


def test_the_production_profile_is_the_shape_a_platform_team_deploys_and_options_override_it(passes):
    """Issue 35: the long-run soak runs S3 through a connection, Celery and both pipelines."""
    soak = passes._script("soak")
    unset = {"store": None, "executor": None, "input": None, "active_runs": None}
    assert soak.profile_options("production", unset) == {"store": "s3", "executor": "celery",
                                                         "input": "both", "active_runs": 3}
    assert soak.profile_options("production", {**unset, "executor": "local"})["executor"] == "local"
    assert soak.profile_options("quick", unset) == {"store": "file", "executor": "local",
                                                    "input": "files", "active_runs": 1}


def test_every_pass_runs_in_exactly_one_lane(passes):
    named = [name for lane in passes.LANES for name in lane]
    assert sorted(named) == sorted(p.name for p in passes.PASSES)
    lanes = passes.lanes_of(passes.PASSES, len(passes.LANES))  # fidelity too, when named
    assert [[p.name for p in lane] for lane in lanes] == [list(lane) for lane in passes.LANES]
    [one] = passes.lanes_of(passes.PASSES, 1)  # KAFKA_EOS_TEST_LANES=1: PASSES order, one at a time
    assert [p.name for p in one] == [p.name for p in passes.PASSES]
    chosen = [p for p in passes.PASSES if p.name in ("embedded", "cluster")]
    assert [[p.name for p in lane] for lane in passes.lanes_of(chosen, 2)] == [["cluster"], ["embedded"]]
    stray = passes.Pass("stray", "no lane names it")
    assert passes.lanes_of([stray], 2) == [[stray]]  # still runs


def test_a_pass_beside_another_leaves_its_tests_to_it(passes, tmp_path):
    """``args_beside`` applies only when the pass it names runs in the same run."""
    sample = tmp_path / "test_sample.py"
    sample.write_text("def test_mine(): pass\ndef test_theirs(): pass\n")
    leaving = passes.Pass("leaving", "leaves one test", beside="other", args_beside=("-k", "not theirs"))
    alone = passes.run_pass(leaving, [str(sample)], with_passes=frozenset({"leaving"}))
    together = passes.run_pass(leaving, [str(sample)], with_passes=frozenset({"leaving", "other"}))
    assert (alone.passed, together.passed) == (2, 1)


def test_passes_side_by_side_print_their_output_whole(passes, tmp_path, capsys):
    """Two buffered passes at once: each pass's pytest output and its closing lines form one block."""
    import threading

    samples = []
    for name in ("left", "right"):
        sample = tmp_path / f"test_{name}.py"
        sample.write_text("".join(f"def test_{name}_{i}(): print('{name}-line')\n" for i in range(20)))
        samples.append((passes.Pass(name, f"the {name} lane"), sample))
    threads = [threading.Thread(target=passes.run_pass, args=(p, [str(s), "-s", "-v"]),
                                kwargs={"buffered": True}) for p, s in samples]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    out = capsys.readouterr().out
    for name in ("left", "right"):
        assert f"===== pass {name}: started at " in out
        block = out[out.index(f"===== pass {name}: the {name} lane"):out.index(f"===== pass {name}: ok in")]
        other = "right" if name == "left" else "left"
        assert block.count(f"{name}-line") == 20 and f"{other}-line" not in block


def test_the_fidelity_pass_runs_only_when_named_and_the_apache_pass_leaves_it_the_doubles_tests(
    passes, monkeypatch
):
    monkeypatch.delenv(passes.PASSES_ENV, raising=False)
    names = [p.name for p in passes.selected_passes()]
    assert "fidelity" not in names and {"embedded", "apache", "soak"} <= set(names)
    monkeypatch.setenv(passes.PASSES_ENV, "fidelity")
    [fidelity] = passes.selected_passes()
    [apache] = [p for p in passes.PASSES if p.name == "apache"]
    assert fidelity.args[-2:] == ("-m", "broker_double") and apache.args[-2:] == ("-m", "not broker_double")
    assert fidelity.env == apache.env == {"KAFKA_EOS_TEST_KAFKA": "apache"}


def test_the_lane_setting_is_one_or_two_and_anything_else_is_refused(passes, monkeypatch):
    monkeypatch.delenv(passes.LANES_ENV, raising=False)
    assert passes.lane_count() == 1
    monkeypatch.setenv(passes.LANES_ENV, "2")
    assert passes.lane_count() == 2
    monkeypatch.setenv(passes.LANES_ENV, "3")
    with pytest.raises(SystemExit, match="KAFKA_EOS_TEST_LANES='3'"):
        passes.lane_count()
