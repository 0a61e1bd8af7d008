"""Every blocking call of the core (``Wire`` / ``TransactionAdmin``) ends by its deadline.

Before issue #13 the wire layer waited on kafka-python's IO thread without a timeout: a request
the IO thread could not finish (here: a transactional id with a lone surrogate, which fails to
encode and drops the connection) blocked the caller forever. These tests go around the edge
validation on purpose, to prove the bound holds even for input nobody validated.
"""

from __future__ import annotations

import time

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import BrokerUnreachableError

MARGIN_S = 1.5


def test_unencodable_request_ends_at_the_admins_deadline(kafka_broker):
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": kafka_broker.bootstrap})
    with TransactionAdmin(config, deadline=time.monotonic() + 3) as admin:
        started = time.monotonic()
        with pytest.raises(BrokerUnreachableError):
            admin.describe(["etl-\udc80-1"])
        assert time.monotonic() - started < 3 + MARGIN_S


def test_without_a_deadline_a_call_still_ends_within_its_request_budget(kafka_broker):
    """No overall deadline: each wait is bounded by request + connect timeout (2 s + 1 s here)."""
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": kafka_broker.bootstrap})
    with TransactionAdmin(
        config, connect_timeout_ms=1000, request_timeout_ms=2000, retry_timeout_ms=1000
    ) as admin:
        started = time.monotonic()
        with pytest.raises(BrokerUnreachableError):
            admin.describe(["etl-\udc80-2"])
        # one bounded wait (3 s), then the retry budget for re-sending (1 s) at most
        assert time.monotonic() - started < 3 + 1 + MARGIN_S


def test_an_expired_deadline_refuses_to_start():
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": "127.0.0.1:1"})
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError, match="no time left"):
        TransactionAdmin(config, deadline=time.monotonic() - 1)
    assert time.monotonic() - started < 1
