"""How a large commit is spread over connections (``kafka/protocol/lanes.py``): pure rules, no network."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import BrokerUnreachableError, UsageError
from airflow_provider_kafka_eos.kafka.protocol.lanes import (
    AUTO_MAX_LANES,
    AUTO_MIN_GROUP,
    MIN_PER_LANE,
    Lanes,
    lane_counts,
    split,
)


def test_small_groups_stay_on_one_connection():
    assert lane_counts([1, MIN_PER_LANE - 1, 0], lanes=8) == [1, 1, 1]


def test_large_groups_get_one_lane_per_min_share_up_to_the_setting():
    assert lane_counts([MIN_PER_LANE * 3, MIN_PER_LANE * 100], lanes=8) == [3, 8]
    assert lane_counts([MIN_PER_LANE * 100], lanes=1) == [1]


def test_with_no_setting_the_work_chooses_the_lanes():
    """The default (``lanes=None``): ceil(sqrt(n)) lanes for a coordinator's n transactions, so a
    big batch gets many (the sweeps in docs/benchmarks.md: 100 / 1,000 / 10,000 transactions over 3
    coordinators were fastest with 4-8 / 16-32 / 32-64 lanes), a small one stays on one connection."""
    assert lane_counts([0, 1, AUTO_MIN_GROUP - 1], lanes=None) == [1, 1, 1]
    assert lane_counts([AUTO_MIN_GROUP, 33, 333, 3333, 10**6], lanes=None) == [
        4,
        6,
        19,
        AUTO_MAX_LANES,
        AUTO_MAX_LANES,
    ]


def test_split_deals_every_item_once_into_non_empty_shares():
    items = list(range(10))
    shares = split(items, 3)
    assert shares == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert split(items[:2], 5) == [[0], [1]]
    assert split([], 4) == [[]]


@pytest.mark.parametrize("bad", [0, -1, 65, 2.5, "4", True])
def test_bad_lane_count_is_refused_before_any_connection(bad):
    # Nothing listens there: had the admin tried to connect first, it would raise
    # BrokerUnreachableError, not the UsageError (so no clock is needed to tell).
    unreachable = KafkaClientConfig.from_mapping({"bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(UsageError, match="lanes must be a whole number from 1 to 64") as info:
        TransactionAdmin(unreachable, lanes=bad)
    assert repr(bad) in str(info.value)


class _StubWire:
    """Stands in for a Wire: Lanes only opens, counts and closes them (no network here)."""

    def __init__(self) -> None:
        self.requests = Counter({"EndTxn": 2})
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_lanes_open_on_demand_are_reused_counted_and_closed():
    opened: list[_StubWire] = []

    def open_wire():
        opened.append(_StubWire())
        return opened[-1]

    primary = _StubWire()
    lanes = Lanes(primary, open_wire)
    assert lanes.wires(1) == [primary] and not opened
    first = lanes.wires(3)
    assert first[0] is primary and len(first) == 3 and len(opened) == 2
    assert lanes.wires(2) == first[:2] and len(opened) == 2  # reused, none opened
    assert lanes.opened == 3 and lanes.requests() == {"EndTxn": 6}
    lanes.close()
    assert all(w.closed for w in opened) and not primary.closed  # the primary is the caller's


def test_a_lane_that_cannot_open_means_fewer_lanes_and_no_more_tries():
    calls = []

    def refused():
        calls.append(1)
        raise BrokerUnreachableError("the broker refused another connection")

    primary = _StubWire()
    lanes = Lanes(primary, refused)
    assert lanes.wires(4) == [primary]
    assert lanes.wires(4) == [primary] and len(calls) == 3  # the first batch tried; later ones do not
