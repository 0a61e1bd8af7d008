"""The retry budget bounds retriable answers, not how long a big wave takes to send.

Found by the lane sweep (benchmarks/bench_commit_lanes.py): aborting 10,000 transactions by fencing
with ``lanes=2`` on a 3-node Kafka 4.4 under load failed with "did not complete within 30000 ms ...
CONCURRENT_TRANSACTIONS": 1,666 InitProducerIds on one connection took longer than the budget to be
answered once, and every id needs two answers (the fence starts the abort, the next sees it done).

The wire is scripted here (the only mock): a real broker cannot be made to answer a wave slowly on
demand. Time is a fake clock the scripted wire advances, so nothing sleeps.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kafka.structs import TopicPartition

from airflow_provider_kafka_eos.kafka.admin import end_txn
from airflow_provider_kafka_eos.kafka.admin.fencing import fence_many
from airflow_provider_kafka_eos.kafka.errors import BrokerUnreachableError
from airflow_provider_kafka_eos.kafka.protocol import coordinator_answers
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from airflow_provider_kafka_eos.kafka.protocol.coordinator_answers import Retry
from airflow_provider_kafka_eos.kafka.protocol.error_codes import CONCURRENT_TRANSACTIONS, NONE

BUDGET_S = 30.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class ScriptedWire:
    """Answers each wave from ``script`` (one list of codes per wave); each wave takes ``wave_s``."""

    def __init__(self, clock: FakeClock, script: list[int], wave_s: float) -> None:
        self.clock, self.script, self.wave_s, self.waves = clock, script, wave_s, 0

    def coordinators(self, ids):
        return {tid: 0 for tid in ids}

    def forget_coordinator(self, _tid: str) -> None:
        pass

    def send_all(self, batch, raise_errors=False):
        code = self.script[min(self.waves, len(self.script) - 1)]
        self.waves += 1
        self.clock.now += self.wave_s
        return [SimpleNamespace(error_code=code, producer_id=7, producer_epoch=3) for _ in batch]


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(coordinator_answers, "time", fake)
    return fake


def _admin(wire: ScriptedWire) -> SimpleNamespace:
    return SimpleNamespace(wire=wire, retry_timeout_ms=int(BUDGET_S * 1000))


def test_fencing_a_wave_longer_than_the_budget_still_completes(clock):
    wire = ScriptedWire(clock, [CONCURRENT_TRANSACTIONS, NONE], wave_s=BUDGET_S + 5)
    done, failed = fence_many(
        _admin(wire), [(f"t-{i}", 60000) for i in range(50)], new_retry=lambda: Retry(clock.now + BUDGET_S)
    )
    assert not failed
    assert len(done) == 50 and all(aborted for _, _, aborted in done.values())


def test_fencing_without_progress_still_ends_at_the_budget(clock):
    wire = ScriptedWire(clock, [CONCURRENT_TRANSACTIONS], wave_s=1.0)
    started = clock.now
    done, failed = fence_many(_admin(wire), [("t-0", 60000)], new_retry=lambda: Retry(clock.now + BUDGET_S))
    assert not done and set(failed) == {"t-0"}
    assert isinstance(failed["t-0"], BrokerUnreachableError)
    assert "CONCURRENT_TRANSACTIONS" in str(failed["t-0"])
    # the first answer started the abort (progress: a fresh budget); then no progress for BUDGET_S
    assert BUDGET_S <= clock.now - started <= 2 * BUDGET_S + 2


def _committable(tid: str) -> Committable:
    return Committable(
        transactional_id=tid, producer_id=7, producer_epoch=3, partitions=(TopicPartition("t", 0),),
        record_count=1, prepared_at_ms=0, transaction_start_ms=0, transaction_timeout_ms=60000,
        transaction_version=2,
        end_txn_version=5,
    )  # fmt: skip


def test_end_txn_waves_get_a_fresh_budget_after_progress(clock):
    # wave 1: half commit (progress), the rest CONCURRENT_TRANSACTIONS; each wave longer than the budget
    answers = iter([[NONE, CONCURRENT_TRANSACTIONS], [NONE]])

    class HalfWire(ScriptedWire):
        def send_all(self, batch, raise_errors=False):
            codes = next(answers)
            self.clock.now += self.wave_s
            return [SimpleNamespace(error_code=codes[i % len(codes)], producer_id=7, producer_epoch=3)
                    for i in range(len(batch))]  # fmt: skip

    wire = HalfWire(clock, [], wave_s=BUDGET_S + 5)
    done, failed = end_txn.end_txn_group(
        _admin(wire),
        [_committable("a"), _committable("b")],
        True,
        new_retry=lambda: Retry(clock.now + BUDGET_S),
    )
    assert not failed and {o.transactional_id for o in done} == {"a", "b"}
