"""The lane sweep behind the default: bulk commit and bulk abort (by fencing) of 100, 1,000 and
10,000 prepared transactions on a real 3-node Kafka 4.4 cluster, with each lane count and with
no setting (the lanes chosen from the work, ``kafka/protocol/lanes.py:lane_counts``).

Goal (issue 27): with no setting, within 1.2x of the best lane count at each size, for commit
and for abort.

Each cell seeds its own transactions (one record each for commit, none for abort: fencing does
not read them), so every cell starts from the same state; the order of the settings rotates
between repeats, after one unmeasured warm-up cell per step and size. An explicit ``N`` here means exactly
N lanes per coordinator (the benchmark lowers ``MIN_PER_LANE`` to 1 for those cells, so a small
batch is really spread; the shipped explicit setting keeps its floor of 64 per lane). At the end
a read_committed consumer counts every committed key exactly once.

    .venv/bin/python -m benchmarks commit_lanes [--sizes 100,1000,10000] [--lanes 1,2,4,8,16,32,64]
        [--repeat 2] [--steps commit,abort] [--kafka apache3|embedded]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

from benchmarks.bench_cluster_txn import PARTITIONS, _create_topic, _progress, _start

AUTO = "auto"


def _seed(config: Any, ids: list[str], topic: str, *, with_records: bool) -> list[Any]:
    import benchmarks.bench_txn_ops as txn_ops

    txn_ops.PARTITIONS = PARTITIONS
    return txn_ops.seed_in_parallel(config, ids, topic, with_records=with_records, pools=8)


def _cell(config: Any, topic: str, size: int, setting: str, step: str, tag: str) -> tuple[float, int, list]:
    """Seed ``size`` transactions, commit or abort them with ``setting``: (seconds, lanes opened, keys)."""
    import benchmarks.bench_txn_ops as txn_ops
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.protocol import lanes as lanes_module

    ids = [f"bench-lanes-{tag}-{i}" for i in range(size)]
    seeded = _seed(config, ids, topic, with_records=step == "commit")
    explicit = None if setting == AUTO else int(setting)
    shipped_floor = lanes_module.MIN_PER_LANE
    if explicit is not None:
        lanes_module.MIN_PER_LANE = 1
    try:
        with TransactionAdmin(config, lanes=explicit) as admin:
            if step == "commit":
                work = txn_ops._committables(admin, seeded, topic)
                started = time.perf_counter()
                outcomes = admin.commit(work)
            else:
                started = time.perf_counter()
                outcomes = admin.abort(ids)
            seconds = time.perf_counter() - started
            opened = admin.lanes_opened
    finally:
        lanes_module.MIN_PER_LANE = shipped_floor
    want = "committed" if step == "commit" else "aborted"
    done = sum(o.outcome == want for o in outcomes)
    assert done == size, f"{step} {setting} x {size}: {done} {want}"
    keys = [t.encode() for t, *_ in seeded] if step == "commit" else []
    return seconds, opened, keys


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="bench commit_lanes")
    parser.add_argument("--kafka", choices=("apache3", "embedded"), default="apache3")
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--lanes", default="1,2,4,8,16,32,64", help="explicit lane counts beside 'auto'")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--steps", default="commit,abort")
    args = parser.parse_args(argv)
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.protocol import lanes as lanes_module
    from kafka_eos_testing.verify import assert_exactly_once, count_keys

    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    settings = [AUTO, *(x.strip() for x in args.lanes.split(",") if x.strip())]
    steps = [x.strip() for x in args.steps.split(",") if x.strip()]
    started = time.perf_counter()
    broker = _start(args.kafka)
    result: dict[str, Any] = {
        "broker": args.kafka,
        "start_s": round(time.perf_counter() - started, 1),
        "rule": {
            "AUTO_MIN_GROUP": lanes_module.AUTO_MIN_GROUP,
            "AUTO_MAX_LANES": lanes_module.AUTO_MAX_LANES,
        },
        "repeat": args.repeat,
        "cells": {},
    }
    try:
        topic = f"bench-lanes-{uuid.uuid4().hex[:8]}"
        _create_topic(broker.bootstrap, topic, 3 if args.kafka == "apache3" else 1)
        config = KafkaClientConfig.from_mapping({"bootstrap.servers": broker.bootstrap})
        committed: list[bytes] = []
        for step in steps:
            for size in sizes:
                times: dict[str, list[float]] = {s: [] for s in settings}
                opened: dict[str, int] = {}
                # one unmeasured cell first: the first commit of a size meets colder connections and
                # JVM code, and would count against whichever setting the rotation puts first
                _, _, keys = _cell(
                    config, topic, size, AUTO, step, f"{step[0]}{size}-warm-{uuid.uuid4().hex[:6]}"
                )
                committed += keys
                for r in range(args.repeat):
                    order = settings[r % len(settings) :] + settings[: r % len(settings)]
                    for setting in order:
                        tag = f"{step[0]}{size}-{setting}-{r}-{uuid.uuid4().hex[:6]}"
                        seconds, opened[setting], keys = _cell(config, topic, size, setting, step, tag)
                        times[setting].append(seconds)
                        committed += keys
                        _progress(f"{step} {size} lanes={setting}: {seconds:.3f} s ({opened[setting]} lanes)")
                medians = {s: statistics.median(v) for s, v in times.items()}
                best = min((s for s in settings if s != AUTO), key=medians.__getitem__)
                result["cells"][f"{step}-{size}"] = {
                    "median_s": {s: round(v, 3) for s, v in medians.items()},
                    "runs_s": {s: [round(x, 3) for x in v] for s, v in times.items()},
                    "lanes_opened": opened,
                    "best": best,
                    "auto_over_best": round(medians[AUTO] / medians[best], 2),
                }
                _progress(f"{step} {size}: best {best} {medians[best]:.3f} s, auto {medians[AUTO]:.3f} s")
        assert_exactly_once(count_keys(broker.bootstrap, topic, timeout_s=300), committed)
        result["verified_exactly_once"] = len(committed)
    finally:
        broker.stop()
    result["total_s"] = round(time.perf_counter() - started, 1)
    return result
