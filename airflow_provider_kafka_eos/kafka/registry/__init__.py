"""Records in the Confluent wire format through a Schema Registry (issue 38), free of Airflow.

``config``: the registry connection, the key/value format setting, subject naming strategies;
``resolver``: the checks and the schema id of a checkpoint, once on the driver; ``encoder``: Arrow
columns to framed records on the executors. Needs the ``[registry]`` extra (confluent-kafka's
registry client, fastavro, jsonschema).
"""
