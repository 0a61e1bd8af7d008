"""``kafka-eos-txn``: the operator's tool for the transactions a pipeline left behind.

Subcommands (``list``, ``describe``, ``abort``, ``commit``, ``find-hanging``, ``abort-partition``,
``preflight``, ``checkpoints``, ``runbook``, ``completion``), each with its own ``--help``.
The package is split by concern, so a rule has one owner: :mod:`.options` (the command line),
:mod:`.settings` (client settings from a properties file, an Airflow connection or the
environment; the request), :mod:`.output` (tables, JSON, errors, progress, runbook pages),
:mod:`.app` (the run). Importing it loads only the standard library: heavy parts load when a
command needs them.
"""

from __future__ import annotations

from airflow_provider_kafka_eos.cli.app import main, run

__all__ = ["main", "run"]  # the console script's entry point and the same without sys.exit
