"""``./run test``: ruff, then the test passes in order; the last line is the total over all passes.

Each pass is one pytest run with its own environment (which Kafka, which tests). Every pass runs
even when an earlier one failed; the exit status is non-zero if any failed. A pass that selects
no tests (pytest exit code 5) counts as passed. To add a pass (a Spark 3.5 pass, a 3-node
cluster pass), append a :class:`Pass` to ``PASSES`` and put its name in one of ``LANES``.

The passes run one after another. ``KAFKA_EOS_TEST_LANES=2`` runs them in two lanes side by side
(``LANES``), for a machine with cores to spare: each pass's output then goes to its own log and is
printed whole when it ends. On the 2-core CI machine two lanes took as long as one and made
timing-bound tests fail (docs/ci.md), so one lane is the default.

Environment:
  KAFKA_EOS_TEST_PASSES  comma-separated pass names to run (default: every pass but ``fidelity``),
                         e.g. ``embedded`` or ``fidelity``
  KAFKA_EOS_SOAK_SEED    the soak pass's seed (default: the UTC date, YYYYMMDD; printed)
  KAFKA_EOS_TEST_LANES   ``2``: two passes at a time (default ``1``: one, output as it comes)
  extra arguments        ``./run test -k foo`` hands ``-k foo`` to every pass's pytest
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PASSES_ENV = "KAFKA_EOS_TEST_PASSES"
LANES_ENV = "KAFKA_EOS_TEST_LANES"


@dataclass(frozen=True)
class Pass:
    """One pytest run: ``name`` (printed), extra ``env`` and pytest ``args``.

    ``blocking=False`` marks a pass that is still being made green: it runs and reports, but
    its failures do not fail ``./run test`` and are left out of the closing line's totals.
    ``python`` returns the interpreter to run pytest with (default: this one); it is called when
    the pass starts, so a pass can make its own environment (e.g. another PySpark).
    """

    name: str
    description: str
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    blocking: bool = True
    time_limit_s: float | None = None  # the pass is stopped (and fails) after this long
    python: Callable[[], str] | None = None
    # a pass that also runs in this run covers what ``args_beside`` leaves out (the Kafka-facing tests)
    beside: str | None = None
    args_beside: tuple[str, ...] = ()
    # False: runs only when named in $KAFKA_EOS_TEST_PASSES (not in CI: docs/ci.md says when to run it)
    default: bool = True


def _script(name: str):
    """A sibling script as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"kafka_eos_script_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Three minutes of faults: about 15-20 faults and 2-3 committed checkpoints (one run at a
# time), every part of the soak (start-up, nemesis, checker, quiet period, cleanup, Asset events)
# on each run; the long soaks on record (docs/soak.md) are the endurance proof. Five minutes cost
# two more (docs/ci.md).
SOAK_PASS_MINUTES = 3


def _soak_pass() -> Pass:
    """The randomized fault soak (docs/soak.md), ``SOAK_PASS_MINUTES`` of faults, blocking.

    Its seed is ``$KAFKA_EOS_SOAK_SEED`` when set (to replay a red run), else the UTC date
    (``soak.daily_seed``): printed at the start, with the replay command. The test's own timeout
    (pytest-timeout, whose ``finally`` stops Kafka, Airflow and Spark) comes before the pass's
    limit; start-up, the quiet period and the final checks take about 2-4 of its 18 minutes.
    """
    soak = _script("soak")
    text = os.environ.get(soak.SEED_ENV, "").strip()
    if text and not text.isdigit():
        raise SystemExit(f"run test: ${soak.SEED_ENV}={text!r} is not a seed; give a whole number "
                         "(the one a soak printed, to replay it) or unset it (the UTC date is used)")
    seed = int(text) if text else soak.daily_seed()
    minutes = SOAK_PASS_MINUTES
    timeout_s = int(minutes * 60 + 15 * 60)
    return Pass(
        "soak",
        f"the randomized fault soak: {minutes:g} min of faults on Airflow + 3-node Kafka 4.4 + Spark local, "
        f"seed {seed} (replay: ./run soak --minutes {minutes:g} --seed {seed})",
        soak.environment(minutes=minutes, seed=seed),
        tuple(soak.pytest_arguments(timeout_s)),
        time_limit_s=timeout_s + 120,
    )


def _spark35_python() -> str:
    sys.path.insert(0, str(ROOT / "scripts"))
    import spark_venv

    return str(spark_venv.ensure("3.5"))


PASSES: list[Pass] = [
    Pass(
        "embedded",
        "the suite on the embedded broker (the secured-mode tests have their own pass; when the apache "
        "pass runs too, the Kafka-facing tests are its: here only the embedded broker's own tests of them)",
        {"KAFKA_EOS_TEST_KAFKA": "embedded"},
        ("-m", "not secured"),
        # one run proves a provider rule, and the proof is real Kafka (DEVELOPERS.md: CI budget)
        beside="apache",
        args_beside=("--kafka-facing-elsewhere",),
    ),
    Pass(
        "apache",
        "every Kafka-facing test on real Apache Kafka 4.4, single node (the embedded broker's own tests: "
        "the fidelity pass)",
        {"KAFKA_EOS_TEST_KAFKA": "apache"},
        ("--kafka-facing", "-m", "not broker_double"),
        # a bound, not a goal: alone it takes about 22 min (docs/ci.md); past this something hangs
        time_limit_s=float(os.environ.get("KAFKA_EOS_APACHE_PASS_LIMIT_S", 50 * 60)),
    ),
    Pass(
        "fidelity",
        "the embedded broker's own tests on real Apache Kafka 4.4 (what the double is held to): not in CI; "
        "run it when tests/testing/broker or the Kafka version changes",
        {"KAFKA_EOS_TEST_KAFKA": "apache"},
        ("tests/testing", "--kafka-facing", "-m", "broker_double"),
        default=False,
    ),
    Pass(
        "secured",
        "TLS, mTLS, SCRAM and OIDC on real Kafka 4.4 nodes (one per mode), and client.properties parsed "
        "as Kafka's own Java classes parse it",
        {"KAFKA_EOS_TEST_KAFKA": "apache"},
        ("tests/system/secured", "tests/kafka/test_java_properties_parity.py", "-m", "secured"),
    ),
    Pass(
        "cluster",
        "cluster fault tests (tests/system/cluster) on a real 3-node Apache Kafka 4.4 cluster, started once",
        {"KAFKA_EOS_TEST_KAFKA": "apache3"},
        ("tests/system/cluster", "-m", "kafka_cluster"),
    ),
    Pass(
        "spark35",
        "the Spark tests and a job on a Spark standalone cluster, on PySpark 3.5 (its own venv, "
        "scripts/spark_venv.py)",
        {"KAFKA_EOS_TEST_KAFKA": "embedded"},
        # tests/spark less the two files the layout of issue 25 moved in, so the pass runs what it ran;
        # the conformance suite on the standalone cluster (a task and the driver killed, rerun, commit,
        # count); the operator's and the executors' checks do not depend on the
        # PySpark version: the apache pass runs them on 4.x
        (
            "tests/spark",
            "--ignore=tests/spark/test_job_s3.py",
            "--ignore=tests/spark/test_spark_client_files.py",
            # the Spark Connect server's jar ships in the PySpark wheel only from 4.0 on
            "--ignore=tests/spark/test_writer_connect.py",
            "tests/system/conformance/test_conformance.py::"
            "test_give_up_then_task_and_driver_killed_then_rerun_commit_and_retrigger[standalone-client]",
        ),
        python=_spark35_python,
    ),
    _soak_pass(),
]

# With KAFKA_EOS_TEST_LANES=2, the two lanes, each run in order, side by side (docs/ci.md: on two
# cores this is no faster than one lane); the apache pass is the longest, so the short secured and
# cluster passes follow it.
LANES: tuple[tuple[str, ...], ...] = (
    ("apache", "fidelity", "secured", "cluster"),
    ("embedded", "spark35", "soak"),
)


@dataclass
class Outcome:
    name: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    ok: bool = True
    blocking: bool = True


def _junit(junit: Path) -> ET.Element | None:
    try:
        return ET.parse(junit).getroot()  # noqa: S314 (the JUnit XML our own pytest run just wrote)
    except (OSError, ET.ParseError):
        return None


def _counts(root: ET.Element, outcome: Outcome) -> None:
    for suite in root.iter("testsuite"):
        tests = int(suite.get("tests", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        outcome.failed += failed
        outcome.skipped += skipped
        outcome.passed += tests - failed - skipped


def _slowest_files(root: ET.Element, count: int = 12) -> list[tuple[str, float]]:
    """The test files that took longest in this pass (summed test times), for making CI room."""
    per_file: dict[str, float] = {}
    for case in root.iter("testcase"):
        parts = (case.get("classname") or "?").split(".")
        while len(parts) > 1 and parts[-1][:1].isupper():  # a test class inside the module
            parts.pop()
        module = ".".join(parts)
        per_file[module] = per_file.get(module, 0.0) + float(case.get("time") or 0.0)
    return sorted(per_file.items(), key=lambda item: -item[1])[:count]


_PRINTING = threading.Lock()


def run_pass(test_pass: Pass, extra: list[str], environment: Future[str] | None = None, *,
             with_passes: frozenset[str] = frozenset(), buffered: bool = False) -> Outcome:
    """Run one pass; ``environment``: its interpreter, being made (see :func:`prepare_environments`).

    ``with_passes``: the names of every pass in this run (``Pass.beside``); ``buffered``: the output
    goes to a log printed whole at the end (the pass runs beside another).
    """
    outcome = Outcome(test_pass.name, blocking=test_pass.blocking)
    header = f"\n===== pass {test_pass.name}: {test_pass.description}"
    if buffered:
        print(f"===== pass {test_pass.name}: started at {time.strftime('%H:%M:%S')} (output when it ends)",
              flush=True)
    else:
        print(header, flush=True)
    started = time.monotonic()
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"kafka-eos-pass-{test_pass.name}-") as tmp, \
            open(Path(tmp) / "output.log", "w+") if buffered else contextlib.nullcontext() as log:
        junit = Path(tmp) / "junit.xml"
        try:
            if environment is not None:
                python = environment.result()
            else:
                python = test_pass.python() if test_pass.python else sys.executable
        except (OSError, subprocess.SubprocessError) as exc:
            notes.append(f"===== pass {test_pass.name}: cannot make its environment: {exc}")
            python, code = None, 1
        if python is not None:
            beside = test_pass.args_beside if test_pass.beside in with_passes else ()
            command = [python, "-m", "pytest", *test_pass.args, *beside, f"--junitxml={junit}", *extra]
            env = {**os.environ, **test_pass.env}
            if test_pass.python:  # that environment's Spark workers run its own interpreter
                env.update(PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
                env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
            process = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True,
                                       stdout=log, stderr=subprocess.STDOUT if log else None)
            try:
                code = process.wait(timeout=test_pass.time_limit_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                limit = test_pass.time_limit_s
                notes.append(f"===== pass {test_pass.name}: stopped after its limit of {limit:.0f} s")
                code = -1
        root = _junit(junit)
        slowest = _slowest_files(root) if root is not None else []
        if root is not None:
            _counts(root, outcome)
        if slowest:
            notes.append(f"===== pass {test_pass.name}: slowest files: "
                         + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in slowest))
        output = ""
        if log is not None:
            log.seek(0)
            output = f"{header}\n{log.read()}"
    outcome.seconds = time.monotonic() - started
    outcome.ok = code in (0, 5)  # 5: no tests selected (e.g. -k matched nothing here)
    if not outcome.ok and outcome.failed == 0:
        outcome.failed = 1  # pytest itself failed (usage error, crash): count it
    notes.append(
        f"===== pass {test_pass.name}: {'ok' if outcome.ok else 'FAILED'} in {outcome.seconds:.0f} s "
        f"({outcome.passed} passed, {outcome.failed} failed, {outcome.skipped} skipped)"
    )
    with _PRINTING:
        print(output + "\n".join(notes), flush=True)
    return outcome


def selected_passes() -> list[Pass]:
    wanted = [n.strip() for n in os.environ.get(PASSES_ENV, "").split(",") if n.strip()]
    if not wanted:
        return [p for p in PASSES if p.default]
    known = {p.name: p for p in PASSES}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise SystemExit(f"run test: unknown pass(es) {unknown} in ${PASSES_ENV}; known: {', '.join(known)}")
    return [known[n] for n in wanted]


def prepare_environments(passes: list[Pass], pool: ThreadPoolExecutor) -> dict[str, Future[str]]:
    """Start making every pass's own environment now, while the first passes run.

    Making one (a venv with another PySpark: mostly downloading and unpacking) costs a minute
    on a fresh machine; done beside the embedded pass it costs CI nothing.
    """
    return {p.name: pool.submit(p.python) for p in passes if p.python is not None}


def lanes_of(passes: list[Pass], lanes: int) -> list[list[Pass]]:
    """The selected passes split into ``LANES`` (``lanes=1``: one lane, in ``PASSES`` order)."""
    if lanes <= 1:
        return [list(passes)]
    by_name = {p.name: p for p in passes}
    placed = [[by_name[name] for name in lane if name in by_name] for lane in LANES]
    missing = [p for p in passes if not any(p in lane for lane in placed)]
    placed[-1].extend(missing)  # a pass no lane names still runs (last lane, after the others)
    return [lane for lane in placed if lane]


def lane_count() -> int:
    """``$KAFKA_EOS_TEST_LANES``: 1 (default) or 2; anything else is refused by name."""
    text = os.environ.get(LANES_ENV, "").strip() or "1"
    if text not in ("1", "2"):
        raise SystemExit(f"run test: ${LANES_ENV}={text!r}: give 1 (one pass at a time) or 2 (two lanes)")
    return int(text)


def main(argv: list[str]) -> int:
    passes = selected_passes()
    names = frozenset(p.name for p in passes)
    started = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pass-environment")
    environments = prepare_environments(passes, pool)
    ruff = subprocess.run([str(Path(sys.executable).with_name("ruff")), "check", "."], cwd=ROOT).returncode
    if ruff != 0:
        print("===== ruff: FAILED", flush=True)
    lanes = lanes_of(passes, lane_count())
    buffered = len(lanes) > 1

    def run_lane(lane: list[Pass]) -> list[Outcome]:
        return [run_pass(p, argv, environments.get(p.name), with_passes=names, buffered=buffered)
                for p in lane]

    with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="lane") as lane_pool:
        done = [future.result() for future in [lane_pool.submit(run_lane, lane) for lane in lanes]]
    order = {p.name: i for i, p in enumerate(PASSES)}
    outcomes = sorted((o for lane in done for o in lane), key=lambda o: order.get(o.name, len(order)))
    pool.shutdown()
    print(f"\n===== {len(outcomes)} pass(es) in {time.monotonic() - started:.0f} s", flush=True)
    for o in outcomes:
        print(
            f"  {o.name:10} {'ok' if o.ok else 'FAILED':6} {o.seconds:6.0f} s  "
            f"{o.passed} passed, {o.failed} failed, {o.skipped} skipped"
            f"{'' if o.blocking else '  (non-blocking: not in the totals)'}",
            flush=True,
        )
    line, code = closing_line(outcomes, ruff_failed=ruff != 0)
    print(line, flush=True)
    return code


def closing_line(outcomes: list[Outcome], *, ruff_failed: bool) -> tuple[str, int]:
    """The last line CI reads (totals of the blocking passes) and the exit status.

    A non-blocking pass is reported above this line but neither counted here nor able to fail
    the run: it is still being made green (see its ``Pass`` entry).
    """
    blocking = [o for o in outcomes if o.blocking]
    passed = sum(o.passed for o in blocking)
    failed = sum(o.failed for o in blocking) + (1 if ruff_failed else 0)
    skipped = sum(o.skipped for o in blocking)
    ok = failed == 0 and not ruff_failed and all(o.ok for o in blocking)
    return f"{passed} passed, {failed} failed, {skipped} skipped", 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
