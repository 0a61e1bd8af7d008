"""An S3-API server on loopback for the manifest store's tests and demos: moto's server (from PyPI).

    ./run s3                 # foreground; prints the endpoint and the environment to use
    python -m kafka_eos_testing.s3_server --port 9000

Why this server: the manifest store relies on S3's conditional writes (``If-None-Match: *`` to
create only if absent, ``If-Match: <etag>`` to replace only if unchanged, 412 otherwise), and
moto's server implements both (``tests/testing/test_s3_server.py`` proves it against the raw API
before any provider test relies on it). It installs from PyPI with the test dependencies, so CI
builds nothing; MinIO and versitygw implement the same and would need a Go build per machine
(docs/dependencies.md). Data lives in the server's memory: a restart starts empty.

Clients find it the way boto and s3fs find any endpoint: ``AWS_ENDPOINT_URL`` and the usual
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_DEFAULT_REGION`` (:meth:`S3Server.env`).
Test-only: nothing in the provider imports this module.
"""

from __future__ import annotations

import argparse
import collections
import re
import signal
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from kafka_eos_testing.launched import LaunchedServer, free_port

__all__ = ["S3Server", "seed_manifests"]

ACCESS_KEY = "kafka-eos-test"
SECRET_KEY = "kafka-eos-test-secret"  # noqa: S105 (a local test server's dummy credential)
REGION = "us-east-1"


class S3Server(LaunchedServer):
    """One moto S3 server process on 127.0.0.1; ``stop()`` (or the context manager) ends it."""

    what = "the S3 server"
    stop_timeout_s = 10.0
    poll_interval_s = 0.1

    def __init__(self, port: int | None = None, *, log_path: Path | None = None,
                 start_timeout_s: float = 60.0) -> None:
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.url = self.endpoint
        self._launch([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                     start_timeout_s=start_timeout_s)

    def _ready(self) -> bool:
        try:
            urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()  # noqa: S310 (loopback)
        except OSError:
            return False
        return True

    def env(self) -> dict[str, str]:
        """The environment boto3, s3fs and the AWS CLI read to reach this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
        }

    def client(self) -> Any:
        """A boto3 S3 client for this server (tests of the raw API)."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def create_bucket(self, name: str) -> str:
        """Create ``name``; returns ``s3://name``."""
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"

    def requests(self) -> collections.Counter[str]:
        """Requests the server answered so far, from its log (needs ``log_path``), by kind: ``LIST``
        (ListObjects, ``LIST+`` a continuation page), ``GET``, ``HEAD``, ``PUT``, ``DELETE``, ...

        Counted on the server side, so a client's retries and pages are all in it."""
        if self.log_path is None:
            raise RuntimeError("S3Server(log_path=...) is needed to count requests")
        counts: collections.Counter[str] = collections.Counter()
        for method, target in _REQUEST_LINE.findall(self.log_path.read_text(errors="replace")):
            if method == "GET" and ("list-type=" in target or re.match(r"^/[^/?]+/?(\?|$)", target)):
                counts["LIST+" if "continuation-token=" in target else "LIST"] += 1
            else:
                counts[method] += 1
        return counts


_REQUEST_LINE = re.compile(r'"(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP/[0-9.]+" \d{3}')


def seed_manifests(server: S3Server, bucket: str, prefix: str, pipeline_id: str,
                   checkpoint_ids: list[int], *, prepared: set[int], threads: int = 8) -> None:
    """Valid manifests written straight through the S3 API (as another process would), COMMITTED
    except the ``prepared`` checkpoint ids, one committable each; for listing tests and benchmarks."""
    import concurrent.futures

    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
        Manifest,
        ManifestStatus,
        manifest_bytes,
        manifest_uri,
    )
    from airflow_provider_kafka_eos.kafka.protocol.committable import Committable

    base = f"s3://{bucket}/{prefix}"
    client = server.client()

    def put(checkpoint: int) -> None:
        now = int(time.time() * 1000)
        tid = f"{pipeline_id}-0-{checkpoint}"
        manifest = Manifest(
            pipeline_id=pipeline_id, checkpoint_id=checkpoint, transactional_id_prefix=pipeline_id,
            naming_strategy="INCREMENTING", topic="t",
            status=ManifestStatus.PREPARED if checkpoint in prepared else ManifestStatus.COMMITTED,
            committables=[Committable(transactional_id=tid, producer_id=1000 + checkpoint, producer_epoch=0,
                                      partitions=[["t", 0]], record_count=1, prepared_at_ms=now,
                                      transaction_start_ms=now, transaction_timeout_ms=900_000,
                                      transaction_version=2, end_txn_version=5)],
            created_at_ms=now, updated_at_ms=now,
        )
        uri = manifest_uri(base, pipeline_id, checkpoint)
        client.put_object(Bucket=bucket, Key=uri.removeprefix(f"s3://{bucket}/"),
                          Body=manifest_bytes(manifest, uri))

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, checkpoint_ids))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="./run s3", description="An S3-API server (moto) on 127.0.0.1, in the foreground.")
    parser.add_argument("--port", type=int, default=None, help="port (default: a free one)")
    parser.add_argument("--bucket", action="append", default=[], help="create this bucket (repeatable)")
    args = parser.parse_args(argv)
    server = S3Server(args.port)
    for bucket in args.bucket:
        server.create_bucket(bucket)
    print(f"listening on {server.endpoint}", flush=True)
    for key, value in server.env().items():
        print(f"export {key}={value}", flush=True)
    stop = {"now": False}

    def on_signal(*_: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        while not stop["now"] and server.process.poll() is None:
            time.sleep(0.5)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
