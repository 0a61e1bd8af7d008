"""The Kafka-input rules of the soak's checker find each anomaly they exist for, and pass a clean
history; the feeder's transactions are what the input topic shows, read as the checker reads it.

The rules are fed hand-made histories, manifests and readings (``judge_kafka_input``); the feeder
and the readings run against a broker (the embedded one, or Kafka 4.4 in the apache pass).
"""

from __future__ import annotations

import time

from soak_checker import read_committed_records
from soak_checker_kafka_input import group_offsets, judge_kafka_input
from soak_feeder import Feeder
from soak_history import History, read_history

from kafka_eos_testing.broker.txn_testkit import create_topic


def _input(txn: int, outcome: str, n: int = 2) -> dict:
    keys = [f"i{txn:06d}:{i:02d}" for i in range(n)]
    return {"kind": "input", "txn": txn, "keys": keys, "outcome": outcome}


def _manifest(checkpoint: int, status: str, *ranges: tuple[int, int, int]) -> dict:
    return {"pipeline_id": "k", "checkpoint_id": checkpoint, "status": status, "committables": [],
            "input": {"id": f"kafka:{checkpoint}", "kafka": {"ranges": [
                {"topic": "in", "partition": p, "from": low, "to": high} for p, low, high in ranges]}}}


# txn 1: two records committed, on partitions 0 and 1; txn 2: aborted (never in the input);
# txn 3: committed, at offsets 3 (the aborted ones and their markers took 1-2 on partition 0).
HISTORY = [_input(1, "committed"), _input(2, "aborted"), _input(3, "committed")]
INPUTS = [(0, 0, "i000001:00"), (1, 0, "i000001:01"), (0, 3, "i000003:00"), (1, 3, "i000003:01")]
ALL_OUT = {"i000001:00": 1, "i000001:01": 1, "i000003:00": 1, "i000003:01": 1}


def test_a_clean_history_passes_and_the_group_followed():
    manifests = [_manifest(1, "COMMITTED", (0, 0, 1), (1, 0, 1)),
                 _manifest(2, "ABORTED", (0, 1, 4), (1, 1, 4)),
                 _manifest(3, "COMMITTED", (0, 1, 4), (1, 1, 4))]
    verdict = judge_kafka_input(HISTORY, manifests, INPUTS, ALL_OUT, final=True, offsets={0: 4, 1: 4})
    assert verdict.ok, verdict.summary()
    assert (verdict.committed_checkpoints, verdict.keys_checked, verdict.batches) == (2, 4, 3)


def test_lost_duplicated_aborted_unexpected_overlap_and_a_group_behind_are_each_named():
    manifests = [_manifest(1, "COMMITTED", (0, 0, 1), (1, 0, 1)),
                 _manifest(2, "COMMITTED", (0, 0, 4), (1, 1, 4))]
    counts = {"i000001:00": 2, "i000003:00": 1, "i000003:01": 1,  # i000001:01 lost, i000001:00 twice
              "i000002:00": 1, "zz": 1}  # an aborted input record, and a key no input has
    verdict = judge_kafka_input(HISTORY, manifests, INPUTS, counts, final=True, offsets={0: 4, 1: 1})
    assert verdict.duplicated == ["i000001:00 (input partition 0 offset 0) x2"]
    assert verdict.lost == [
        "i000001:01 (input partition 1 offset 0): in COMMITTED checkpoint 1, not in the output"]
    assert verdict.aborted_reads == ["i000002:00: its input transaction was aborted, yet it is in the output"]
    assert verdict.unexpected == ["zz x1"]
    assert verdict.double_commits == ["input partition 0: checkpoints 1 [0, 1) and 2 [0, 4) overlap"]
    assert verdict.stuck == ["group offset of input partition 1 is 1, the COMMITTED checkpoints end at 4"]


def test_output_ahead_of_every_committed_range_is_tolerated_only_while_a_checkpoint_is_prepared():
    """The commit task ends a checkpoint's transactions one after another: its output may show
    before its manifest says COMMITTED. After the run nothing may be visible outside a COMMITTED range."""
    committing = [_manifest(1, "COMMITTED", (0, 0, 1), (1, 0, 1)),
                  _manifest(2, "PREPARED", (0, 1, 4), (1, 1, 4))]
    assert judge_kafka_input(HISTORY, committing, INPUTS, ALL_OUT, final=False).ok
    given_up = [committing[0], _manifest(2, "ABORTED", (0, 1, 4), (1, 1, 4))]
    assert len(judge_kafka_input(HISTORY, given_up, INPUTS, ALL_OUT, final=False).aborted_reads) == 2


def test_input_never_read_is_lost_only_after_the_final_run_and_hidden_output_is_not_yet_visible():
    manifests = [_manifest(1, "COMMITTED", (0, 0, 1), (1, 0, 1)),
                 _manifest(2, "COMMITTED", (0, 1, 4), (1, 1, 2))]
    counts = {"i000001:00": 1, "i000001:01": 1}  # txn 3's output behind an open transaction
    during = judge_kafka_input(HISTORY, manifests, INPUTS, counts, final=False,
                               not_yet_visible={"i000003:00"})
    assert during.ok and during.not_yet_visible == 1
    final = judge_kafka_input(HISTORY, manifests, INPUTS, counts, final=True, offsets={0: 4, 1: 2})
    assert final.lost == [
        "i000003:00 (input partition 0 offset 3): in COMMITTED checkpoint 2, not in the output",
        "i000003:01 (input partition 1 offset 3): never read (no COMMITTED checkpoint's range holds it)"]


def test_the_input_is_the_truth_about_what_the_feeder_wrote():
    """An ``unknown`` outcome is whatever the input topic shows; a ``committed`` one must be there,
    an ``aborted`` one must not."""
    history = [_input(1, "committed"), _input(2, "unknown"), _input(3, "aborted")]
    inputs = [(0, 0, "i000002:00"), (1, 0, "i000002:01"), (0, 1, "i000003:00")]
    manifests = [_manifest(1, "COMMITTED", (0, 0, 2), (1, 0, 1))]
    counts = {"i000002:00": 1, "i000002:01": 1}
    verdict = judge_kafka_input(history, manifests, inputs, counts, final=False)
    assert verdict.lost == ["i000001:00: committed by the feeder, not in the input topic",
                            "i000001:01: committed by the feeder, not in the input topic"]
    assert verdict.aborted_reads == [
        "i000003:00 (input partition 0 offset 1): its transaction was aborted, yet read_committed shows it"]


def test_the_feeders_transactions_are_what_the_input_topic_shows(kafka_broker, unique_name, tmp_path):
    topic = unique_name("soak-in")
    create_topic(kafka_broker.bootstrap, topic, partitions=3)
    history = History(tmp_path / "h.jsonl")
    feeder = Feeder({"bootstrap.servers": kafka_broker.bootstrap}, topic, 3, history, seed=7,
                    every_s=(0.0, 0.05))
    feeder.start()
    deadline = time.monotonic() + 60
    while feeder.written["committed"] < 6 or feeder.written["aborted"] < 2:
        assert time.monotonic() < deadline, f"the feeder wrote only {feeder.written} in 60 s"
        time.sleep(0.1)  # polling interval of a deadline-bounded wait
    feeder.stop()
    history.close()
    events = [e for e in read_history(tmp_path / "h.jsonl") if e["kind"] == "input"]
    assert {e["outcome"] for e in events} == {"committed", "aborted"}  # no fault: never unknown
    inputs = read_committed_records({"bootstrap_servers": kafka_broker.bootstrap}, topic, timeout_s=30)
    committed = sorted(k for e in events if e["outcome"] == "committed" for k in e["keys"])
    assert sorted(key for _, _, key in inputs) == committed
    verdict = judge_kafka_input(events, [], inputs, {}, final=False)
    assert verdict.ok, verdict.summary()
    assert group_offsets({"bootstrap_servers": kafka_broker.bootstrap}, unique_name("no-group"), topic) == {}
