"""Assets and lineage: one name per Kafka topic for Airflow Assets and OpenLineage (``lineage``),
and the Asset event per checkpoint made visible by a commit (``events``). Airflow side."""
