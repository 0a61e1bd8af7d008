"""``./run soak --minutes N --seed S [--dir D]``: the randomized fault soak (tests/system/soak/test_soak.py).

A real Airflow (scheduler, triggerer, dag-processor, api-server, LocalExecutor), a 3-node Apache
Kafka 4.4 and Spark, the example pipeline and cleanup DAGs, a seeded nemesis, an independent
checker. The history, the summary and every log stay in ``--dir`` (default: a new temp folder,
printed). The same seed draws the same faults in the same order (their timing follows the run).

``./run test``'s ``soak`` pass (scripts/test_passes.py) runs the same test with the same
environment and pytest arguments (:func:`environment`, :func:`pytest_arguments`), 5 minutes.

``--profile production`` is the shape a platform team deploys (:data:`PRODUCTION`): manifests on
the S3-API server through an Airflow ``aws`` connection, Celery workers, both pipelines; the long
records in docs/soak.md run it. An option given on the command line wins over the profile's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/system/soak/test_soak.py"
SEED_ENV = "KAFKA_EOS_SOAK_SEED"
# The production shape (issue 35): what each option defaults to under ``--profile production``.
PRODUCTION = {"store": "s3", "executor": "celery", "input": "both", "active_runs": 3}
# ... and with no profile: the quick shape of ``./run test``'s pass.
# One run at a time, the pipeline's documented envelope (docs/user-guide/pipeline.md): overlapping runs
# abort each other's prepared checkpoints (docs/soak.md, 2026-11-28, open in issue 39).
QUICK = {"store": "file", "executor": "local", "input": "files", "active_runs": 1}


def environment(*, minutes: float, seed: int | None, out: Path | None = None, fault_every: str = "4,12",
                spark: str = "local", active_runs: int = 1, store: str = "file",
                executor: str = "local", input_: str = "files") -> dict[str, str]:
    """The soak test's settings (``tests/system/soak/test_soak.py`` reads them), over the Kafka it needs."""
    env = {"KAFKA_EOS_TEST_KAFKA": "apache3", "KAFKA_EOS_SOAK_MINUTES": str(minutes),
           "KAFKA_EOS_SOAK_FAULT_EVERY_S": fault_every, "KAFKA_EOS_SOAK_SPARK": spark,
           "KAFKA_EOS_SOAK_ACTIVE_RUNS": str(active_runs), "KAFKA_EOS_SOAK_STORE": store,
           "KAFKA_EOS_SOAK_EXECUTOR": executor, "KAFKA_EOS_SOAK_INPUT": input_}
    if out is not None:
        env["KAFKA_EOS_SOAK_DIR"] = str(out)
    if seed is not None:
        env[SEED_ENV] = str(seed)
    return env


def pytest_arguments(timeout_s: int) -> list[str]:
    """``-s``: the seed, the output folder and the checker's summary reach the terminal (or CI's log)
    as they are printed; ``timeout``: pytest-timeout stops the test (its ``finally`` stops every
    server) instead of the project's 10-minute default per test."""
    return ["-s", "-m", "soak", TEST, "-o", f"timeout={timeout_s}"]


def daily_seed(today: datetime | None = None) -> int:
    """CI's seed: the UTC date as YYYYMMDD. A new fault schedule every day (a fixed seed would draw
    the same one forever), the same one for every CI run of a day (a rerun of a red run replays
    it, rather than drawing a fresh, maybe easier one), and printed, so ``--seed`` replays it."""
    return int((today or datetime.now(timezone.utc)).strftime("%Y%m%d"))


def profile_options(profile: str, given: dict[str, object]) -> dict[str, object]:
    """The soak's shape: the profile's value for each option the command line left unset."""
    base = PRODUCTION if profile == "production" else QUICK
    return {name: given[name] if given.get(name) is not None else value for name, value in base.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="./run soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="how long the nemesis runs (default 5)")
    parser.add_argument("--seed", type=int, default=None, help="the nemesis's and the driver's seed "
                        "(default: drawn and printed)")
    parser.add_argument("--fault-every", default="4,12", metavar="MIN,MAX",
                        help="seconds between two faults, drawn between MIN and MAX (default 4,12)")
    parser.add_argument("--spark", choices=("local", "cluster"), default="local",
                        help="spark-submit in local mode, or on a standalone cluster (master + 2 workers) "
                        "whose executors and workers the nemesis kills too")
    parser.add_argument("--profile", choices=("quick", "production"), default="quick",
                        help="quick (default: local files, LocalExecutor, the file pipeline, 1 run at a "
                        "time) or production (S3 through an aws connection, Celery, both pipelines, 3 "
                        "runs at once); the options below override it")
    parser.add_argument("--active-runs", type=int, choices=range(1, 5), default=None, metavar="{1-4}",
                        help="pipeline runs the driver keeps going at once (default 1, the pipeline's "
                        "documented max_active_runs); more overlap runs, which then queue for the "
                        "pipeline's writer lease (docs/soak.md)")
    parser.add_argument("--store", choices=("file", "s3"), default=None,
                        help="the manifest store: local files, or an S3-API server (moto) reached through "
                        "an Airflow aws connection, paused now and then by the nemesis")
    parser.add_argument("--executor", choices=("local", "celery"), default=None,
                        help="Airflow's executor: LocalExecutor, or CeleryExecutor with Redis and two Celery "
                        "workers that the nemesis kills and pauses")
    parser.add_argument("--input", choices=("files", "kafka", "both"), default=None,
                        help="the pipelines under test: the file-input eos_pipeline, the Kafka-input "
                        "eos_kafka_to_kafka fed by transactional upstream writes (committed and aborted), "
                        "or both at once")
    parser.add_argument("--dir", default=None, help="where the history, summary and logs go")
    args, pytest_args = parser.parse_known_args(argv)
    shape = profile_options(args.profile, vars(args))
    out = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kafka-eos-soak-"))
    env = {**os.environ, **environment(minutes=args.minutes, seed=args.seed, out=out,
                                       fault_every=args.fault_every, spark=args.spark,
                                       active_runs=shape["active_runs"], store=shape["store"],
                                       executor=shape["executor"], input_=shape["input"])}
    timeout = int(args.minutes * 60 + 45 * 60)  # the soak plus start-up, the quiet period and the checks
    command = [sys.executable, "-m", "pytest", *pytest_arguments(timeout), *pytest_args]
    described = ", ".join(f"{name} {value}" for name, value in shape.items())
    print(f"soak: {args.minutes} min, profile {args.profile} ({described}); history and logs in {out}",
          flush=True)
    return subprocess.run(command, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
