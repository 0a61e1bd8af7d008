"""The newest-versions canary: this checkout against the newest Airflow and confluent-kafka on PyPI.

    ./run canary                 # or: .venv/bin/python scripts/canary.py [-- PYTEST ARGS]

The provider bounds Airflow from below only and confluent-kafka below its next major
(docs/dependencies.md), so a new release reaches users before CI's pinned environment sees it.
This builds ``.venv-canary`` with uv (the project editable with ``[spark]``, the test double and
the ``test`` group, as ``./run`` does) resolved to the newest releases: ``--upgrade`` with the
index metadata of Airflow and confluent-kafka refreshed, and overrides that lift the
confluent-kafka cap (a 3.x would be tested, not skipped). Everything else keeps
``scripts/constraints.txt`` (the pyspark pair, celery). Then it prints the versions it got and
runs a small subset (``TESTS``): the Airflow-facing tests (hooks, operators, sensor, trigger,
provider info), the released-producer regression test (a librdkafka that aborts on destroy would
break prepared transactions) and the CLI's transactions on the embedded broker.

Not part of ``./run test``: it resolves against the live index, so its result changes when
PyPI does rather than when the code does (a blocking CI job would fail a change for a release
it did not cause), and it installs a second ~1 GB environment. Exit status: pytest's, or 3 when
the environment cannot be built (the message says which package failed to resolve).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-canary"
# The packages whose newest release is the point; the override lifts our own upper bound.
CANARY_OVERRIDES = ("apache-airflow>=3.1", "confluent-kafka>=2.16")
REFRESHED = (
    "apache-airflow",
    "apache-airflow-core",
    "apache-airflow-task-sdk",
    "apache-airflow-providers-apache-spark",
    "confluent-kafka",
    "kafka-python",
)
REPORTED = (*REFRESHED, "pyspark", "pyspark-client")
# The Airflow-facing tests (hooks, operators, sensor, trigger, provider info: what a new Airflow
# breaks first), the regression test that a released librdkafka producer leaves its transaction
# open (what a new confluent-kafka could break), and the CLI's list / describe / commit / abort on
# the embedded broker. Paths follow tests/README.md (tests mirror the package).
TESTS = (
    "tests/hooks",
    "tests/operators",
    "tests/sensors",
    "tests/triggers",
    "tests/project/test_provider_info_listing.py",
    "tests/project/test_provider_registration.py",
    "tests/kafka/producers/test_librdkafka.py",
    "tests/cli/test_cli_transactions.py",
)
INSTALL_TIMEOUT_S = 1200
TEST_TIMEOUT_S = 1800


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(found).exists():
        raise SystemExit("canary: uv is needed (./run installs it into .venv)")
    return found


def build(uv: str) -> Path:
    """``.venv-canary`` upgraded to the newest releases; raises CalledProcessError naming uv's error."""
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(VENV)], check=True, timeout=120)
    overrides = VENV / "canary-overrides.txt"
    overrides.write_text("".join(f"{line}\n" for line in CANARY_OVERRIDES))
    refresh = [arg for name in REFRESHED for arg in ("--refresh-package", name)]
    subprocess.run(
        [uv, "pip", "install", "-q", "-p", str(python), "--upgrade", *refresh,
         "-e", f"{ROOT}[spark]", "-e", f"{ROOT}/testing[s3]", "--group", f"{ROOT / 'pyproject.toml'}:test",
         "-c", str(ROOT / "scripts" / "constraints.txt"), "--override", str(overrides)],
        check=True, timeout=INSTALL_TIMEOUT_S,
    )  # fmt: skip
    return python


def versions(python: Path) -> dict[str, str]:
    """Installed version of each reported distribution, and librdkafka's, read in the canary venv."""
    probe = (
        "import importlib.metadata as m, json, sys, confluent_kafka\n"
        "out = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try: out[name] = m.version(name)\n"
        "    except m.PackageNotFoundError: out[name] = '(not installed)'\n"
        "out['librdkafka'] = confluent_kafka.libversion()[0]\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run(
        [str(python), "-c", probe, *REPORTED], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(result.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="canary", description=__doc__.splitlines()[0])
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest (after --)")
    args = parser.parse_args(argv)
    uv = _uv()
    started = time.monotonic()
    print(f"canary: resolving the newest releases into {VENV.name}", file=sys.stderr)
    try:
        python = build(uv)
    except subprocess.CalledProcessError as exc:
        print(f"canary: the newest releases could not be installed (uv exit {exc.returncode}; its error "
              "is above: a resolution conflict means a new release conflicts with a bound in "
              "pyproject.toml)", file=sys.stderr)
        return 3
    built = time.monotonic() - started
    for name, version in versions(python).items():
        print(f"canary: {name} {version}")
    env = {**os.environ, "KAFKA_EOS_TEST_KAFKA": "embedded", "PYSPARK_PYTHON": str(python),
           "PYSPARK_DRIVER_PYTHON": str(python), "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"}
    command = [str(python), "-m", "pytest", "-q", *TESTS, *args.pytest_args]
    tested = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, env=env, timeout=TEST_TIMEOUT_S, check=False)
    print(f"canary: environment {built:.0f} s, tests {time.monotonic() - tested:.0f} s, "
          f"exit {result.returncode}", file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
