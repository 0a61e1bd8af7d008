"""Test-only spark-submit entry point: the exactly-once job with a fault plan from the environment.

The production job (``spark/job.py``) never reads a fault plan; this wrapper is the explicit
test hook for runs that go through spark-submit (tests/system/faults, the demo): it parses
``KAFKA_EOS_FAULT`` (see ``spark/faults.py`` for the fault names) and hands the plan to
``job.main``. Point spark-submit (or a ``SparkEosSubmitOperator``'s ``application``) at this file.
"""

from __future__ import annotations

import os
import sys

from airflow_provider_kafka_eos.spark import job
from airflow_provider_kafka_eos.spark.faults import FaultPlan

ENV_VAR = "KAFKA_EOS_FAULT"
FILE = os.path.abspath(__file__)


def main() -> int:
    plan = FaultPlan.parse(os.environ.get(ENV_VAR))
    return job.main(sys.argv[1:], fault_plan=plan)


if __name__ == "__main__":
    sys.exit(main())
