"""The error-code table (``kafka/protocol/error_codes.py``) is kafka-python's: each constant is the
code whose kafka-python class carries that protocol-guide name, so no module spells a number."""

from __future__ import annotations

import kafka.errors as kerr

from airflow_provider_kafka_eos.kafka.protocol import error_codes

# kafka-python kept older names for these two (the protocol guide renamed them).
KAFKA_PYTHON_NAME = {"NONE": "NO_ERROR", "NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION"}


def test_each_constant_is_the_code_kafka_python_names_so():
    constants = [n for n in error_codes.__all__ if n.isupper()]
    assert len(constants) == len(set(getattr(error_codes, n) for n in constants)), "two names, one code"
    for name in constants:
        code = getattr(error_codes, name)
        assert kerr.for_code(code).message == KAFKA_PYTHON_NAME.get(name, name), name


def test_error_name_is_searchable_and_carries_the_code():
    assert error_codes.error_name(error_codes.CONCURRENT_TRANSACTIONS) == "CONCURRENT_TRANSACTIONS (51)"
