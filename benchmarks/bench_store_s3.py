"""The manifest store on the S3-API server (moto, ``kafka_eos_testing/s3_server.py``): listing cost, latency.

No target (a local moto server says how many requests a listing costs; its latency is a lower
bound of a real S3 region's, plus moto's own Python overhead). Reported:

- ``prepared_index``: ``ManifestStore.prepared()`` over ``count`` manifests of ``pipelines``
  pipelines (1% PREPARED, the rest COMMITTED): wall time and the requests the server answered
  (``LIST`` first pages, ``LIST+`` continuation pages, ``GET`` objects, ``HEAD``);
- ``ops_ms``: median and p90 of ``repeat`` calls each of ``read_versioned`` (one manifest),
  ``create_object`` (``If-None-Match: *``), ``replace_if`` (``If-Match``), and ``list`` (one
  listing of a 100-manifest folder, cache dropped first as the store does);
- the load average before and after (the machine is shared: say so beside the numbers).

    .venv/bin/python -m benchmarks store_s3 [--count=10000] [--pipelines=4] [--repeat=30]
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.options import parse_options


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median": round(statistics.median(ordered) * 1000, 2),
            "p90": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 2)}


def run(count: int, pipelines: int, repeat: int) -> dict[str, Any]:
    import s3fs

    from airflow_provider_kafka_eos.kafka.checkpoints import store_objects
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import list_files
    from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
    from kafka_eos_testing.s3_server import S3Server, seed_manifests

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, S3Server(log_path=Path(tmp) / "s3.log") as server:
        os.environ.update(server.env())
        s3fs.S3FileSystem.clear_instance_cache()
        bucket = "bench-store"
        base = server.create_bucket(bucket) + "/manifests"
        per = count // pipelines
        started = time.perf_counter()
        prepared_total = 0
        for p in range(pipelines):
            ids = list(range(1, per + 1))
            prepared = set(ids[:: 100])
            prepared_total += len(prepared)
            seed_manifests(server, bucket, "manifests", f"pipe{p}", ids, prepared=prepared)
        seed_s = time.perf_counter() - started
        store = ManifestStore.configured(base)

        before = server.requests()
        started = time.perf_counter()
        index = store.prepared()
        index_s = time.perf_counter() - started
        cost = server.requests() - before
        assert len(index) == prepared_total, (len(index), prepared_total)

        seed_manifests(server, bucket, "small", "pipe", list(range(1, 101)), prepared=set())
        one = f"s3://{bucket}/manifests/pipe0/checkpoint-{1:012d}.json"
        samples: dict[str, list[float]] = {"read_versioned": [], "create_object": [], "replace_if": [],
                                           "list": []}
        for i in range(repeat):
            t = time.perf_counter()
            data, _ = store_objects.read_versioned(one)
            samples["read_versioned"].append(time.perf_counter() - t)
            target = f"s3://{bucket}/ops/object-{i}.json"
            t = time.perf_counter()
            assert store_objects.create_object(target, data)
            samples["create_object"].append(time.perf_counter() - t)
            _, version = store_objects.read_versioned(target)
            t = time.perf_counter()
            assert store_objects.replace_if(target, data + b" ", version)
            samples["replace_if"].append(time.perf_counter() - t)
            t = time.perf_counter()
            assert len(list_files(f"s3://{bucket}/small/pipe")) == 100
            samples["list"].append(time.perf_counter() - t)
    return {
        "manifests": per * pipelines,
        "pipelines": pipelines,
        "prepared": prepared_total,
        "seed_s": round(seed_s, 1),
        "prepared_index": {"seconds": round(index_s, 2), "requests": dict(sorted(cost.items()))},
        "ops_ms": {name: _ms(values) for name, values in samples.items()},
        "repeat": repeat,
        "load_average_before": [round(x, 1) for x in load_before],
        "load_average_after": [round(x, 1) for x in os.getloadavg()],
    }


def main(argv: list[str]) -> dict[str, Any]:
    opts = parse_options(argv, {"count": 10_000, "pipelines": 4, "repeat": 30})
    return run(opts["count"], opts["pipelines"], opts["repeat"])
