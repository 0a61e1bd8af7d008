"""How a large commit is spread over connections (``kafka/lanes.py``): pure rules, no network."""

from __future__ import annotations

import time

import pytest

from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import UsageError
from airflow_provider_kafka_eos.kafka.lanes import MIN_PER_LANE, lane_counts, split
from airflow_provider_kafka_eos.kafka.transactions import TransactionAdmin


def test_small_groups_stay_on_one_connection():
    assert lane_counts([1, MIN_PER_LANE - 1, 0], lanes=8) == [1, 1, 1]


def test_large_groups_get_one_lane_per_min_share_up_to_the_setting():
    assert lane_counts([MIN_PER_LANE * 3, MIN_PER_LANE * 100], lanes=8) == [3, 8]
    assert lane_counts([MIN_PER_LANE * 100], lanes=1) == [1]


def test_split_deals_every_item_once_into_non_empty_shares():
    items = list(range(10))
    shares = split(items, 3)
    assert shares == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert split(items[:2], 5) == [[0], [1]]
    assert split([], 4) == [[]]


@pytest.mark.parametrize("bad", [0, -1, 65, 2.5, "4", True, None])
def test_bad_lane_count_is_refused_before_any_connection(bad):
    unreachable = KafkaClientConfig.from_mapping({"bootstrap.servers": "127.0.0.1:1"})
    started = time.monotonic()
    with pytest.raises(UsageError, match="lanes must be a whole number from 1 to 64") as info:
        TransactionAdmin(unreachable, lanes=bad)
    assert repr(bad) in str(info.value)
    assert time.monotonic() - started < 1  # refused before trying to connect
