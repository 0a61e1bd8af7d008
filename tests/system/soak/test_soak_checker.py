"""The soak's checker finds each anomaly it exists for, and passes a clean history.

The rules are fed hand-made histories and manifests (``judge``); the Kafka readings
(``count_output``, ``read_output``, ``stuck``) run against a broker holding a committed, an
aborted and an open transaction, written with confluent-kafka (not the provider), as the checker reads them
with kafka-python (not the provider).
"""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer
from soak_checker import (
    S3Manifests,
    count_output,
    judge,
    read_manifests,
    read_output,
    reading,
    stuck,
    writer_lease,
)
from soak_history import History, read_history

from kafka_eos_testing.broker.txn_testkit import create_topic


def _batch(name: str, n: int = 3) -> dict:
    return {"kind": "batch", "batch": name, "keys": [f"{name}:u{i}" for i in range(n)]}


def _manifest(checkpoint: int, batch: str, status: str) -> dict:
    return {"pipeline_id": "p", "checkpoint_id": checkpoint, "status": status, "input": {"id": batch},
            "committables": []}


def test_a_clean_history_passes():
    history = [_batch("b1"), _batch("b2"), {"kind": "run", "run_id": "r1", "batch": "b1", "state": "success"}]
    manifests = [_manifest(1, "b1", "COMMITTED"), _manifest(2, "b2", "ABORTED")]
    counts = {"b1:u0": 1, "b1:u1": 1, "b1:u2": 1}
    verdict = judge(history, manifests, counts, final=True)
    assert verdict.ok, verdict.summary()
    assert (verdict.batches, verdict.committed_checkpoints, verdict.keys_checked) == (2, 1, 6)


def test_lost_duplicated_unexpected_and_double_commit_are_each_named():
    history = [_batch("b1"), _batch("b2"), _batch("b3")]
    manifests = [_manifest(1, "b1", "COMMITTED"), _manifest(2, "b2", "COMMITTED"),
                 _manifest(3, "b3", "COMMITTED"), _manifest(4, "b3", "COMMITTED")]
    counts = {"b1:u0": 1, "b1:u1": 1,  # b1:u2 lost
              "b2:u0": 2, "b2:u1": 1, "b2:u2": 1,  # duplicated
              "b3:u0": 1, "b3:u1": 1, "b3:u2": 1,
              "zz:u9": 1}  # no batch of the history
    verdict = judge(history, manifests, counts, final=False)
    assert verdict.lost == ["b1:u2 (batch b1 COMMITTED)"]
    assert verdict.duplicated == ["b2:u0 x2"]
    assert verdict.double_commits == ["b3: 2 COMMITTED checkpoints"]
    assert verdict.unexpected == ["zz:u9 x1"]
    assert not verdict.ok


def test_an_aborted_read_counts_during_the_run_only_once_every_checkpoint_of_it_is_aborted():
    history = [_batch("b1", 1), _batch("b2", 1)]
    counts = {"b1:u0": 1, "b2:u0": 1}
    in_flight = [_manifest(1, "b1", "PREPARED"), _manifest(2, "b2", "ABORTED")]
    verdict = judge(history, in_flight, counts, final=False)
    assert verdict.aborted_reads == ["b2:u0 (batch b2: checkpoints ['ABORTED'])"]
    final = judge(history, in_flight, counts, final=True)
    assert len(final.aborted_reads) == 2  # after the quiet period nothing is in flight


def test_a_successful_run_without_a_committed_checkpoint_is_a_loss_after_the_quiet_period():
    history = [_batch("b1", 1), {"kind": "run", "run_id": "r1", "batch": "b1", "state": "success"}]
    manifests = [_manifest(1, "b1", "PREPARED")]
    assert judge(history, manifests, {}, final=False).ok
    assert judge(history, manifests, {}, final=True).lost == [
        "run r1 succeeded but batch b1 has no COMMITTED checkpoint"]


def test_a_committed_batch_behind_an_open_transaction_is_not_yet_visible_during_the_run_and_lost_after():
    """The first long soak's checks flagged a COMMITTED batch as lost for a minute: the checkpoint
    PREPARED before it was still open on the same partitions, so read_committed showed nothing past
    it (Kafka's last stable offset), until that one committed too."""
    history = [_batch("b1"), _batch("b2")]
    manifests = [_manifest(1, "b1", "PREPARED"), _manifest(2, "b2", "COMMITTED")]
    behind = {"b1:u0", "b1:u1", "b1:u2", "b2:u0", "b2:u1", "b2:u2"}
    during = judge(history, manifests, {}, final=False, not_yet_visible=behind)
    assert during.ok and during.not_yet_visible == 3
    assert judge(history, manifests, {}, final=False, not_yet_visible={"b2:u0"}).lost == [
        "b2:u1 (batch b2 COMMITTED)", "b2:u2 (batch b2 COMMITTED)"]
    assert len(judge(history, manifests, {}, final=True, not_yet_visible=behind).lost) == 3


def test_history_survives_a_line_cut_short(tmp_path):
    history = History(tmp_path / "h.jsonl")
    history.record("batch", batch="b1", keys=["b1:u0"])
    history.close()
    with (tmp_path / "h.jsonl").open("a") as handle:
        handle.write('{"kind": "fau')  # the writer was killed mid-line
    assert [e["kind"] for e in read_history(tmp_path / "h.jsonl")] == ["batch"]


def test_manifests_are_read_as_plain_json(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "checkpoint-000000000001.json").write_text(json.dumps(_manifest(1, "b1", "COMMITTED")))
    (tmp_path / "p" / ".checkpoint-000000000002.json.tmp").write_text("{")
    assert [m["checkpoint_id"] for m in read_manifests(tmp_path, "p")] == [1]
    assert read_manifests(tmp_path, "absent") == []


def test_manifests_on_s3_are_read_with_the_checkers_own_client_and_fetched_again_when_changed(s3_server):
    from kafka_eos_testing import s3_server as moto

    client = s3_server.client()
    s3_server.create_bucket("checker-store")
    put = lambda key, body: client.put_object(Bucket="checker-store", Key=f"m/p/{key}", Body=body)  # noqa: E731
    put("checkpoint-000000000002.json", json.dumps(_manifest(2, "b2", "PREPARED")))
    put("checkpoint-000000000001.json", json.dumps(_manifest(1, "b1", "COMMITTED")))
    put("_inputs/claim.json", "{")  # another object of the pipeline: not a manifest
    put("_writer.json", json.dumps({"checkpoint_id": 2, "expires_at_ms": 5}))
    store = S3Manifests(s3_server.endpoint, "checker-store", "m", moto.ACCESS_KEY, moto.SECRET_KEY,
                        moto.REGION)
    assert [(m["checkpoint_id"], m["status"]) for m in read_manifests(store, "p")] == [
        (1, "COMMITTED"), (2, "PREPARED")]
    put("checkpoint-000000000002.json", json.dumps(_manifest(2, "b2", "COMMITTED")))  # a new ETag
    assert [m["status"] for m in read_manifests(store, "p")] == ["COMMITTED", "COMMITTED"]
    assert read_manifests(store, "absent") == []
    assert writer_lease(store, "p")["expires_at_ms"] == 5 and writer_lease(store, "absent") is None


def test_the_writer_lease_is_read_as_plain_json(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "_writer.json").write_text(json.dumps({"checkpoint_id": 3, "expires_at_ms": 7}))
    assert writer_lease(tmp_path, "p") == {"checkpoint_id": 3, "expires_at_ms": 7}
    assert writer_lease(tmp_path, "absent") is None


def _transaction(bootstrap: str, tid: str, topic: str, keys: list[str], end: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    for key in keys:
        producer.produce(topic, key=key.encode(), value=b"v", partition=0)
    assert producer.flush(30) == 0
    if end == "commit":
        producer.commit_transaction(30)
    elif end == "abort":
        producer.abort_transaction(30)
    return producer


def test_kafka_readings_see_committed_only_and_name_what_is_still_open(kafka_broker, unique_name):
    topic, prefix = unique_name("soak-check"), unique_name("soak-tid")
    create_topic(kafka_broker.bootstrap, topic, partitions=2)
    config = {"bootstrap_servers": kafka_broker.bootstrap}
    _transaction(kafka_broker.bootstrap, f"{prefix}-a", topic, ["b1:u0", "b1:u1"], "commit")
    _transaction(kafka_broker.bootstrap, f"{prefix}-b", topic, ["b2:u0"], "abort")
    assert count_output(config, topic) == {"b1:u0": 1, "b1:u1": 1}
    assert stuck(config, topic, prefix, [_manifest(1, "b1", "COMMITTED")]) == []

    open_one = _transaction(kafka_broker.bootstrap, f"{prefix}-c", topic, ["b3:u0"], "open")
    try:
        found = stuck(config, topic, prefix, [_manifest(2, "b3", "PREPARED")])
        assert found[0] == "manifest p/2 still PREPARED"
        assert any(f.startswith(f"transaction {prefix}-c still") for f in found), found
        assert any(f.startswith(f"{topic}-0: last stable offset") for f in found), found
        started = time.monotonic()
        assert count_output(config, topic, timeout_s=30) == {"b1:u0": 1, "b1:u1": 1}
        assert time.monotonic() - started < 30
        # Committed after the open one, on the same partition: hidden behind it, and named as such.
        _transaction(kafka_broker.bootstrap, f"{prefix}-d", topic, ["b4:u0"], "commit")
        counts, beyond = read_output(config, topic, timeout_s=30)
        assert counts == {"b1:u0": 1, "b1:u1": 1}
        assert beyond == {"b3:u0", "b4:u0"}
    finally:
        open_one.abort_transaction(30)


def test_the_replay_command_names_every_option_that_is_not_the_default():
    """The 5-minute `--store s3 --executor celery` soak printed a replay command without them: the
    same seed on another deployment draws other faults."""
    from test_soak import replay_options

    assert replay_options({}) == ""
    assert replay_options({"KAFKA_EOS_SOAK_STORE": "file", "KAFKA_EOS_SOAK_ACTIVE_RUNS": "1"}) == ""
    assert replay_options({"KAFKA_EOS_SOAK_ACTIVE_RUNS": "2"}) == " --active-runs 2"  # no longer the default
    assert replay_options({"KAFKA_EOS_SOAK_STORE": "s3", "KAFKA_EOS_SOAK_EXECUTOR": "celery",
                           "KAFKA_EOS_SOAK_ACTIVE_RUNS": "3", "KAFKA_EOS_SOAK_FAULT_EVERY_S": "6,20"}) == (
        " --active-runs 3 --fault-every 6,20 --store s3 --executor celery")


def test_the_soak_reads_every_option_the_script_sets_with_the_same_defaults():
    """scripts/soak.py sets the variables, test_soak.py reads them: one table each side, kept equal."""
    import importlib.util
    import pathlib

    from test_soak import _OPTIONS

    path = pathlib.Path(__file__).resolve().parents[3] / "scripts" / "soak.py"
    spec = importlib.util.spec_from_file_location("soak_script_for_options", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    defaults = script.environment(minutes=5, seed=None)
    options = {name: default for name, default, _ in _OPTIONS.values()}
    assert {k: v for k, v in defaults.items() if k in options} == options
    assert set(defaults) - set(options) == {"KAFKA_EOS_TEST_KAFKA", "KAFKA_EOS_SOAK_MINUTES"}


def test_a_reading_is_taken_again_while_kafka_answers_with_a_retriable_error():
    """The first soak of 2026-11-27 died after 56 minutes (103 checkpoints, every check clean):
    a check's metadata request went to the Kafka node the nemesis had just killed, and
    kafka-python raised KafkaConnectionError instead of asking another node."""
    import pytest
    from kafka.errors import KafkaConnectionError, TopicAuthorizationFailedError

    answers = [KafkaConnectionError("111 ECONNREFUSED"), KafkaConnectionError("111 ECONNREFUSED"), "read"]

    def take() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert reading("a check", take, timeout_s=30) == "read" and answers == []
    with pytest.raises(TopicAuthorizationFailedError):  # not retriable: raised at once
        reading("a check", lambda: (_ for _ in ()).throw(TopicAuthorizationFailedError()), timeout_s=30)
    started = time.monotonic()
    with pytest.raises(AssertionError, match="a check: Kafka could not be read in 0 s"):
        reading("a check", lambda: (_ for _ in ()).throw(KafkaConnectionError("down")), timeout_s=0)
    assert time.monotonic() - started < 5
