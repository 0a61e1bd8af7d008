"""The conformance suite's job on Spark Connect: ``spark/job.py``'s body in a client process of its own.

As ``SparkEosConnectOperator`` runs it (``job.run(args, spark=<Connect session>)``), but in a
subprocess, so that a fault plan's ``exit_after_manifest`` ends this client (the Connect "driver"
side: restore, the vote, the manifest) and not the test. Arguments: the job's; the server's
``sc://`` address in ``$KAFKA_EOS_CONNECT_URL``, the fault plan in ``$KAFKA_EOS_FAULT``
(``kafka_eos_testing/fault_job.py``), the Kafka config in the private file the job reads.
"""

from __future__ import annotations

import os
import sys

from airflow_provider_kafka_eos.spark import job
from airflow_provider_kafka_eos.spark.faults import FaultPlan
from kafka_eos_testing import fault_job

URL_ENV = "KAFKA_EOS_CONNECT_URL"
FILE = os.path.abspath(__file__)


def main() -> int:
    from pyspark.sql import SparkSession

    plan = FaultPlan.parse(os.environ.get(fault_job.ENV_VAR))
    session = SparkSession.builder.remote(os.environ[URL_ENV]).create()
    try:
        uri = job.run(job.build_arg_parser().parse_args(sys.argv[1:]), fault_plan=plan, spark=session)
    finally:
        session.stop()
    print(job.result_line(uri), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
