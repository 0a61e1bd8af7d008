"""A randomized, seeded harness for the verdict (``kafka/admin/verdict.py``), with its own checker.

Each trial prepares one transaction the way a Spark task does (a librdkafka producer, released
without ``close()``), records its committable (with the first offsets), then plays a fault drawn
from the seed: the committer killed before EndTxn, after EndTxn (the EndTxn went through and
nothing was recorded), EndTxn duplicated, the coordinator's timeout-abort, an abort by fencing,
the id reused (POOLING) after a commit or an abort, two committers at once, a commit racing the
timeout-abort. The ids start at any epoch, the TV2 limit included (32763-32766), so commits and
aborts rotate the producer id. Then the provider acts as a restarted pipeline would (commit the
committable again; a give-up of what the verdict proved aborted) and the trial records the verdict.

The checker reads the topic with a plain ``read_committed`` consumer (confluent-kafka, no provider
code) and holds every verdict against it: COMMITTED -> each of the trial's keys exactly once,
ABORTED -> none of them, UNKNOWN -> allowed (a refusal), but counted. Any key seen twice anywhere
is a duplicate. A wrong verdict or a duplicate fails the run.

The embedded broker runs in this process (``InProcessBroker``), so the harness can set an idle
id's epoch directly (what 32,763 InitProducerId rounds do on a real Kafka, instantly) and time a
transaction out on demand (``abort_timed_out`` for that transaction's start time). Replay a run with
``python -m kafka_eos_testing.verdict_harness --trials N --seed S``.

With ``--apache-nodes 3`` the harness starts its own 3-node Apache Kafka 4.4 (the launcher's
cluster, jars from Maven) and adds the fault a cluster allows: the coordinator's node killed
(SIGKILL) while an EndTxn is in flight, started again before the restarted pipeline commits, so the
verdict is read from a coordinator that loaded the transaction from its log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import random
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.producer.transaction import EndTxnRequest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import DataLossError, KafkaEosError
from airflow_provider_kafka_eos.kafka.producers.arrow import ArrowPartitionTransaction
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from airflow_provider_kafka_eos.kafka.protocol.verdicts import Verdict
from kafka_eos_testing.broker.broker import Broker, BrokerConfig
from kafka_eos_testing.transactions import age_transactional_ids, produce_transaction

__all__ = ["FAULTS", "InProcessBroker", "RunReport", "run_trials"]

FAULTS = (
    "commit",
    "killed_after_end_txn",
    "duplicated_end_txn",
    "timeout_abort",
    "fenced",
    "reuse_after_commit",
    "reuse_after_abort",
    "concurrent_committers",
    "commit_racing_timeout",
    "coordinator_killed",
)
# Where a trial's id starts: low epochs, and the TV2 limit, where a completion rotates the producer id.
START_EPOCHS = (None, None, 32762, 32763, 32764, 32765, 32766)
PARTITIONS = 3
# The librdkafka producers' timing knobs: no linger, and short retry backoffs. With librdkafka's default
# 100 ms backoff its init_transactions waited ~0.2 s a producer (half of a trial's time on the in-process
# broker); backoffs change when a request is retried, not what a transaction does.
_QUICK_PRODUCER = {"linger.ms": 0, "retry.backoff.ms": 5, "retry.backoff.max.ms": 20}


class InProcessBroker:
    """The embedded broker on a thread of this process: its coordinator is reachable for test moves."""

    def __init__(self, **config: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.broker = Broker(BrokerConfig(**config))
        self.thread = threading.Thread(target=self.loop.run_forever, name="in-process-broker", daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.broker.start(), self.loop).result(30)
        self.bootstrap = self.broker.bootstrap

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the broker's event loop (the coordinator's own thread) and return its result."""
        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def set_epoch(self, transactional_id: str, epoch: int) -> None:
        """Age an idle id to ``epoch`` (create it first with one InitProducerId)."""
        coordinator = self.broker.coordinator

        def move() -> None:
            if coordinator.get(transactional_id) is None:
                coordinator.init_producer_id(transactional_id, 60_000)
            txn = coordinator.get(transactional_id)
            assert txn.state.wire_name in ("Empty", "CompleteCommit", "CompleteAbort"), txn.state
            txn.producer_epoch = epoch

        self.call(move)

    def time_out(self, transactional_id: str) -> None:
        """The coordinator's timeout-abort of this one transaction (its start moved into the past)."""
        coordinator = self.broker.coordinator

        def expire() -> None:
            txn = coordinator.get(transactional_id)
            if txn is not None and txn.state.wire_name == "Ongoing":
                txn.start_ms = coordinator.now_ms() - txn.timeout_ms - 1
                coordinator.abort_timed_out()

        self.call(expire)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@dataclass
class Trial:
    number: int
    fault: str
    start_epoch: int | None
    transactional_id: str
    keys: list[bytes]
    committable: Committable | None = None
    verdict: str = ""
    evidence: str = ""
    action: str = ""
    extra_keys: dict[bytes, int] = field(default_factory=dict)  # keys of a reuse: expected count


@dataclass
class RunReport:
    seed: int
    trials: int
    verdicts: Counter = field(default_factory=Counter)
    faults: Counter = field(default_factory=Counter)
    rotated: int = 0
    wrong: list[str] = field(default_factory=list)
    duplicates: int = 0
    lost: int = 0
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return not self.wrong and self.duplicates == 0 and self.lost == 0

    def summary(self) -> str:
        return (f"verdict harness seed {self.seed}: {self.trials} trials in {self.seconds:.0f} s, verdicts "
                f"{dict(self.verdicts)}, {self.rotated} across a producer-id rotation, "
                f"faults {dict(self.faults)}; "
                f"{len(self.wrong)} wrong verdict(s), {self.duplicates} duplicate(s), {self.lost} record(s) "
                "lost that a verdict called committed")


KillCoordinator = Callable[[TransactionAdmin, str, Callable[[], None]], None]


def run_trials(bootstrap: str, trials: int, seed: int, *, set_epoch: Callable[[str, int], None] | None = None,
               time_out: Callable[[str], None] | None = None, batch: int = 50,
               age_real_ids: bool = False, progress: Callable[[str], None] | None = None,
               kill_coordinator: KillCoordinator | None = None, replicas: int = 1) -> RunReport:
    """Play ``trials`` seeded trials against the cluster at ``bootstrap`` and check them; see the module.

    ``set_epoch``: moves an idle id's epoch at once (the in-process broker). ``age_real_ids``: on a
    real cluster, each batch's fresh ids that start near the limit are aged together first with
    pipelined InitProducerId rounds (``age_transactional_ids``), as a long-lived pipeline ages them.
    ``kill_coordinator(admin, transactional_id, in_flight)``: kills the id's coordinator node while
    ``in_flight`` (an EndTxn) runs on another thread, and starts it again (a real cluster of 3).
    """
    rng = random.Random(seed)  # noqa: S311 - a replayable test schedule, not a secret
    report = RunReport(seed, trials)
    started = time.monotonic()
    topic = f"verdict-{seed}-{uuid.uuid4().hex[:6]}"
    _create_topic(bootstrap, topic, replicas)
    faults = [f for f in FAULTS if (time_out is not None or "timeout" not in f)
              and (kill_coordinator is not None or f != "coordinator_killed")]
    pool: list[str] = []  # ids free for a POOLING reuse by a later trial
    config = KafkaClientConfig({"bootstrap.servers": bootstrap})
    with TransactionAdmin(config, retry_timeout_ms=20_000) as admin, _Reader(bootstrap, topic) as reader:
        done = 0
        while done < trials:
            played, planned = [], []
            for number in range(done, min(trials, done + batch)):
                fault = rng.choice(faults)
                reuse = pool.pop(rng.randrange(len(pool))) if pool and rng.random() < 0.3 else None
                # A fresh id may start anywhere; a reused one goes on from where it is (an epoch never
                # moves back: its partitions remember the producer's last epoch).
                movable = set_epoch is not None or age_real_ids
                start = rng.choice(START_EPOCHS) if movable and reuse is None else None
                tid = reuse or f"verdict-{seed}-{number}-{uuid.uuid4().hex[:4]}"
                keys = [f"{tid}/{number}/{i}".encode() for i in range(rng.randint(1, 6))]
                planned.append(Trial(number, fault, start, tid, keys))
                pool.append(tid)
            _move_epochs(admin, planned, set_epoch)
            for trial in planned:
                _play(admin, bootstrap, topic, trial, rng, time_out, kill_coordinator)
                report.faults[trial.fault] += 1
                report.verdicts[trial.verdict] += 1
                played.append(trial)
            _check(reader, played, report)
            done += len(played)
            if progress is not None:
                progress(f"{done}/{trials} trials, {time.monotonic() - started:.0f} s: "
                         f"{len(report.wrong)} wrong, {report.duplicates} duplicate(s)")
    report.seconds = time.monotonic() - started
    return report


def _move_epochs(admin: TransactionAdmin, planned: list[Trial], set_epoch: Callable[[str, int], None] | None
                 ) -> None:
    """Start each planned fresh id at its drawn epoch: at once in-process, else aged together."""
    wanted = [(t.transactional_id, t.start_epoch) for t in planned if t.start_epoch is not None]
    if set_epoch is not None:
        for tid, epoch in wanted:
            set_epoch(tid, epoch)
        return
    for epoch in sorted({e for _, e in wanted}):
        age_transactional_ids(admin, [tid for tid, e in wanted if e == epoch], epoch)


def _play(admin: TransactionAdmin, bootstrap: str, topic: str, trial: Trial, rng: random.Random,
          time_out: Callable[[str], None] | None, kill_coordinator: KillCoordinator | None = None) -> None:
    parts = rng.sample(range(PARTITIONS), rng.randint(1, 2))
    producer = "arrow" if rng.random() < 0.75 else "librdkafka"
    c = _prepare(admin, bootstrap, topic, trial.transactional_id, trial.keys, parts, producer)
    if rng.random() < 0.25:  # a hand-typed commit (id, producer id, epoch): no first offsets to read
        c = dataclasses.replace(c, first_offsets=())
    trial.committable = c
    fault = trial.fault
    if fault == "killed_after_end_txn":
        _end_txn(admin, c)  # went through; the committer died before recording anything
    elif fault == "duplicated_end_txn":
        _end_txn(admin, c)
        _end_txn(admin, c)
    elif fault == "timeout_abort" and time_out is not None:
        time_out(c.transactional_id)
    elif fault == "fenced":
        admin.abort([c.transactional_id])
    elif fault in ("reuse_after_commit", "reuse_after_abort"):
        if fault == "reuse_after_commit":
            admin.commit([c])
        else:
            admin.abort([c.transactional_id])
        commit_reuse = rng.random() < 0.5
        extra = [f"{trial.transactional_id}/reuse/{trial.number}/{i}".encode() for i in range(2)]
        produce_transaction(bootstrap, trial.transactional_id, topic, extra, commit=commit_reuse,
                            partitions=parts, **_QUICK_PRODUCER)
        if not commit_reuse:
            admin.abort([trial.transactional_id])
        trial.extra_keys = {k: 1 if commit_reuse else 0 for k in extra}
    elif fault == "concurrent_committers":
        threads = [threading.Thread(target=_commit_quietly, args=(admin, c)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    elif fault == "coordinator_killed" and kill_coordinator is not None:
        kill_coordinator(admin, c.transactional_id, lambda: _end_txn_quietly(admin, c))
    elif fault == "commit_racing_timeout" and time_out is not None:
        racer = threading.Thread(target=time_out, args=(c.transactional_id,))
        racer.start()
        _commit_quietly(admin, c)
        racer.join(60)
    # The restarted pipeline: commit the committable again (its vote stands), as restore does.
    try:
        outcome = admin.commit([c])[0].outcome
        trial.action = outcome
    except DataLossError as exc:
        trial.action = f"refused as data loss: {exc.cause[:80]}"
    except KafkaEosError as exc:
        trial.action = f"refused: {type(exc).__name__}"
    verdict = admin.judge([c], ask_coordinator=True)[c.transactional_id]
    trial.verdict, trial.evidence = verdict.verdict.value, verdict.evidence
    if trial.verdict == Verdict.OPEN.value:  # nothing may stay open: the checker reads past it
        admin.abort([c.transactional_id])
        trial.verdict = admin.judge([c], ask_coordinator=False)[c.transactional_id].verdict.value


def _prepare(admin: TransactionAdmin, bootstrap: str, topic: str, tid: str, keys: list[bytes],
             parts: list[int], producer: str = "librdkafka") -> Committable:
    """One prepared transaction, by either of the provider's producer paths as a Spark task runs it
    (``arrow``: the provider's own Arrow producer on the harness's connections; ``librdkafka``: a
    confluent-kafka producer released without ``close()``)."""
    if producer == "arrow":
        txn = ArrowPartitionTransaction(admin=admin, transactional_id=tid, topic=topic,
                                        transaction_timeout_ms=60_000,
                                        protocol=TransactionProtocol.from_admin(admin))
        txn.begin()
        txn.write_columns(pa.array(keys, pa.binary()), pa.array(keys, pa.binary()),
                          partitions=pa.array([parts[i % len(parts)] for i in range(len(keys))], pa.int32()))
        committable = txn.prepare()
        assert committable is not None and committable.first_offsets, f"{tid}: no committable"
        return committable
    first = produce_transaction(bootstrap, tid, topic, keys, partitions=parts, transaction_timeout_ms=60_000,
                                **_QUICK_PRODUCER)
    d = admin.describe([tid])[tid]
    assert d.state == "Ongoing", f"{tid} is {d.state} after prepare"
    return Committable(tid, d.producer_id, d.producer_epoch, d.partitions, len(keys), int(time.time() * 1000),
                       d.start_time_ms, d.timeout_ms, 2 if admin.transaction_version() >= 2 else 1,
                       admin.end_txn_version(), first_offsets=first)


def _end_txn(admin: TransactionAdmin, c: Committable) -> None:
    node = admin.wire.coordinators([c.transactional_id]).get(c.transactional_id)
    admin.wire.send(EndTxnRequest(transactional_id=c.transactional_id, producer_id=c.producer_id,
                                  producer_epoch=c.producer_epoch, committed=True, version=c.end_txn_version),
                    node if isinstance(node, int) else None)


def _end_txn_quietly(admin: TransactionAdmin, c: Committable) -> None:
    """An EndTxn whose coordinator may die under it: its answer, or its failure, is not the verdict."""
    with contextlib.suppress(Exception):
        _end_txn(admin, c)


def _commit_quietly(admin: TransactionAdmin, c: Committable) -> None:
    with contextlib.suppress(KafkaEosError):  # the race's loser: the restarted commit and the verdict decide
        admin.commit([c])


def _check(reader: _Reader, trials: list[Trial], report: RunReport) -> None:
    seen = reader.read_to_end()
    for trial in trials:
        c = trial.committable
        assert c is not None
        counts = [seen.get(k, 0) for k in trial.keys]
        # its completion rotates the producer id (E = 32766), or its own init did (an id at 32766)
        report.rotated += c.producer_epoch == 32766 or trial.start_epoch == 32766
        expected = {"committed": 1, "aborted": 0}.get(trial.verdict)
        if expected is not None and counts != [expected] * len(counts):
            report.wrong.append(f"trial {trial.number} ({trial.fault}, start epoch {trial.start_epoch}, "
                                f"{c}): verdict {trial.verdict} ({trial.evidence}) but read_committed shows "
                                f"{counts}")
            report.lost += sum(1 for n in counts if n == 0) if expected == 1 else 0
        for key, want in trial.extra_keys.items():
            if seen.get(key, 0) != want:
                report.wrong.append(f"trial {trial.number}: the reuse's key {key!r} seen {seen.get(key, 0)}, "
                                    f"expected {want}")
    report.duplicates = sum(1 for n in seen.values() if n > 1)


class _Reader:
    """The checker's plain ``read_committed`` consumer (confluent-kafka, no provider code), kept open
    for the whole run: each check reads on from where the last one stopped, to the partitions' ends,
    and the counts add up over the run (a key seen twice anywhere is a duplicate). Reading the topic
    from its start at every check made a long run quadratic in its length."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import TopicPartition

        self.topic, self.tp = topic, TopicPartition
        self.seen: Counter = Counter()
        self.consumer = Consumer({"bootstrap.servers": bootstrap,
                                  "group.id": f"verdict-check-{uuid.uuid4().hex}",
                                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False,
                                  # at the end between checks: a fetch held at the broker delays the next
                                  "fetch.wait.max.ms": 10})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.consumer.close()

    def read_to_end(self, timeout_s: float = 60) -> Counter:
        """Every key counted so far, once the consumer stands at each partition's end (the harness
        leaves nothing open, so the last stable offset is the high watermark)."""
        tps = [self.tp(self.topic, p) for p in range(PARTITIONS)]
        ends = {tp.partition: self.consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            positions = {tp.partition: tp.offset for tp in self.consumer.position(tps)}
            if all(ends[p] == 0 or positions.get(p, -1) >= ends[p] for p in ends):
                return self.seen
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                self.seen[msg.key()] += 1
        raise TimeoutError(f"the read_committed checker did not reach the end of {self.topic} "
                           f"in {timeout_s:.0f} s")


def _create_topic(bootstrap: str, topic: str, replicas: int = 1) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures are done
    futures = client.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=replicas)])
    for future in futures.values():
        future.result(30)


class CoordinatorKiller:
    """``kill_coordinator`` on a launcher's cluster: SIGKILL the id's coordinator node while the
    EndTxn is in flight, then start the node again (one node down at a time)."""

    def __init__(self, cluster: Any, seed: int) -> None:
        self.cluster = cluster
        self.rng = random.Random(seed)  # noqa: S311 - a replayable fault schedule

    def __call__(self, admin: TransactionAdmin, transactional_id: str, in_flight: Callable[[], None]) -> None:
        node = admin.wire.coordinators([transactional_id]).get(transactional_id)
        if not isinstance(node, int):
            raise RuntimeError(f"{transactional_id}: no coordinator found ({node}) to kill")
        sender = threading.Thread(target=in_flight, name="end-txn-in-flight")
        sender.start()
        # Where in the EndTxn the node dies (before it is read, while its markers go out, after):
        # the fault's own draw, not a wait for anything.
        time.sleep(self.rng.uniform(0.0, 0.03))
        self.cluster.kill_node(node)
        sender.join(60)
        self.cluster.start_node(node)


def _apache_trials(nodes: int, trials: int, seed: int) -> RunReport:
    """A run on a cluster of its own (the launcher's Apache Kafka 4.4), node kills on 3 nodes."""
    from kafka_eos_testing.apache_kafka.cluster import ApacheKafkaCluster

    cluster = ApacheKafkaCluster({"nodes": nodes, "default_partitions": PARTITIONS})
    try:
        killer = CoordinatorKiller(cluster, seed) if nodes > 1 else None
        return run_trials(cluster.bootstrap, trials, seed, age_real_ids=True, progress=_say,
                          kill_coordinator=killer, replicas=nodes)
    finally:
        cluster.stop()


def _embedded_trials(trials: int, seed: int) -> RunReport:
    """A run on an in-process embedded broker of its own."""
    broker = InProcessBroker(default_partitions=PARTITIONS)
    try:
        return run_trials(broker.bootstrap, trials, seed, set_epoch=broker.set_epoch,
                          time_out=broker.time_out, progress=lambda line: _say(f"seed {seed}: {line}"))
    finally:
        broker.stop()


def worker_seed(seed: int, worker: int) -> int:
    """The seed of worker ``worker`` of a ``--workers`` run: its trials replay alone with it."""
    return seed * 1000 + worker


def _in_workers(trials: int, seed: int, workers: int) -> RunReport:
    """The trials split over ``workers`` processes, each an embedded broker of its own (the in-process
    broker and its clients share one interpreter, so one process uses about one core). Every worker's
    wrong verdicts name its seed; the merged report counts them all."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    shares = [trials // workers + (1 if i < trials % workers else 0) for i in range(workers)]
    seeds = [worker_seed(seed, i) for i in range(workers)]
    started = time.monotonic()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        reports = list(pool.map(_embedded_trials, shares, seeds))
    merged = RunReport(seed, trials)
    for part in reports:
        merged.verdicts.update(part.verdicts)
        merged.faults.update(part.faults)
        merged.rotated += part.rotated
        merged.wrong += [f"seed {part.seed} (--trials {part.trials}): {line}" for line in part.wrong]
        merged.duplicates += part.duplicates
        merged.lost += part.lost
    merged.seconds = time.monotonic() - started
    return merged


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=int(time.strftime("%Y%m%d")))
    parser.add_argument("--bootstrap", help="a real cluster (ids aged to the epoch limit with InitProducerId "
                        "rounds; no timeout-abort faults); without it the in-process embedded broker")
    parser.add_argument("--apache-nodes", type=int, choices=(1, 3),
                        help="a real Apache Kafka 4.4 of its own, 1 or 3 nodes (3: the coordinator's node "
                        "is killed mid-EndTxn among the faults)")
    parser.add_argument("--workers", type=int, default=1,
                        help="embedded broker only: split the trials over N processes, each with its own "
                        "in-process broker and seed SEED*1000+i (the machine's cores; one replays alone)")
    args = parser.parse_args(argv)
    if args.apache_nodes:
        report = _apache_trials(args.apache_nodes, args.trials, args.seed)
    elif args.bootstrap:
        report = run_trials(args.bootstrap, args.trials, args.seed, age_real_ids=True, progress=_say)
    elif args.workers > 1:
        report = _in_workers(args.trials, args.seed, args.workers)
    else:
        report = _embedded_trials(args.trials, args.seed)
    print(report.summary())
    for line in report.wrong[:20]:
        print("WRONG:", line)
    print(json.dumps({"seed": report.seed, "trials": report.trials, "wrong": len(report.wrong),
                      "duplicates": report.duplicates, "lost": report.lost}))
    return 0 if report.clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
