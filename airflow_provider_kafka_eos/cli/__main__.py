"""``python -m airflow_provider_kafka_eos.cli`` runs ``kafka-eos-txn`` (where the script is not on PATH)."""

from airflow_provider_kafka_eos.cli.app import main

if __name__ == "__main__":  # importing the module (pkgutil.walk_packages, docs tools) runs nothing
    main()
