"""Fuzz the embedded broker's request decoder and handlers over the wire, for a set time.

    .venv/bin/python scripts/fuzz_broker.py --seconds 300 [--seed 1] [--out fuzz-findings/]

Not part of CI (the seeded test in tests/testing/broker/test_core_robustness.py is its small, fixed
cousin). It starts ``kafka-eos-devbroker`` as a subprocess (plain listener; ``--sasl`` for a
SASL listener with an ACL file), builds a corpus of valid requests (every advertised API and
version, default-constructed, plus richer hand-made ones: produce with a record batch,
transactional calls with ids, metadata with topics...), and for the given time sends

* mutated corpus requests (bit flips, interesting 8/16/32-bit values at random offsets,
  truncations, insertions, duplicated slices, splices of two requests), always correctly framed;
* valid headers followed by random bodies;
* random frames.

A **finding** is: the broker process exiting; the broker not answering a fresh connection's
Metadata within 10 s (a global hang); an ``unexpected error`` traceback in its log (a handler
that raised instead of answering or refusing: the connection is closed, but it is a bug); its
RSS above ``--max-rss-mb``. Each finding is de-duplicated by its traceback's last line, printed,
and saved with the triggering frame (hex) under ``--out`` for reproduction. A connection that
merely stays silent (a mutated Fetch or JoinGroup may legitimately wait) is reset, not reported.

Exit code: 0 no findings, 1 findings.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from kafka_eos_testing.broker.api import HANDLERS
from kafka_eos_testing.broker.broker import load_handler_modules
from kafka_eos_testing.embedded import start_embedded_broker

INT32 = struct.Struct(">i")
INTERESTING_8 = [0x00, 0x01, 0x7F, 0x80, 0xFF]
INTERESTING_16 = [0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x00FF]
INTERESTING_32 = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x0000FFFF, 1 << 20]
RESPONSE_TIMEOUT_S = 0.5  # a silent connection is reset; Fetch and JoinGroup may wait legitimately


# -- corpus ----------------------------------------------------------------------------------------


def _frame(request: Any, version: int, correlation_id: int = 1) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="fuzz")
    return bytes(request.encode(version=version, header=True))


def _rich_requests() -> list[tuple[Any, int]]:
    """Requests with real content, so mutations reach deeper than empty lists."""
    from kafka.protocol.admin.transactions import DescribeTransactionsRequest, ListTransactionsRequest
    from kafka.protocol.metadata import FindCoordinatorRequest
    from kafka.protocol.producer import ProduceRequest
    from kafka.protocol.producer.transaction import EndTxnRequest, InitProducerIdRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=1, producer_id=7, producer_epoch=0,
        base_sequence=0, batch_size=1 << 20,
    )
    for i in range(3):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v" * 20, headers=[])
    records = bytes(builder.build())
    produce = ProduceRequest(
        transactional_id="fuzz-tx", acks=-1, timeout_ms=1000,
        topic_data=[ProduceRequest.TopicProduceData(
            name="fuzz-topic",
            partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)],
        )],
    )
    return [
        (produce, 9),
        (MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="fuzz-topic")],
                         allow_auto_topic_creation=True), 12),
        (FindCoordinatorRequest(key_type=1, coordinator_keys=["fuzz-tx", "other"]), 4),
        (InitProducerIdRequest(transactional_id="fuzz-tx", transaction_timeout_ms=60000,
                               producer_id=-1, producer_epoch=-1), 5),
        (EndTxnRequest(transactional_id="fuzz-tx", producer_id=7, producer_epoch=0, committed=True), 4),
        (DescribeTransactionsRequest(transactional_ids=["fuzz-tx", "a", "b"]), 0),
        (ListTransactionsRequest(state_filters=["Ongoing"], producer_id_filters=[7], duration_filter=5,
                                 transactional_id_pattern="fuzz.*"), 2),
    ]


def build_corpus(advertised: dict[int, tuple[int, int]]) -> list[bytes]:
    corpus = []
    for key, reg in sorted(HANDLERS.items()):
        if key not in advertised:
            continue
        lo, hi = advertised[key]
        for version in range(lo, hi + 1):
            try:
                corpus.append(_frame(reg.request_class(), version))
            except Exception:  # noqa: S112 (a schema kafka-python cannot default-construct: skip it)
                continue
    for request, version in _rich_requests():
        corpus.append(_frame(request, version))
    return corpus


# -- mutations -------------------------------------------------------------------------------------


def mutate(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(8)
        pos = rng.randrange(len(buf)) if buf else 0
        if choice == 0 and buf:  # bit flip
            buf[pos] ^= 1 << rng.randrange(8)
        elif choice == 1 and buf:
            buf[pos] = rng.choice(INTERESTING_8)
        elif choice == 2 and len(buf) >= 2:
            pos = rng.randrange(len(buf) - 1)
            struct.pack_into(">H", buf, pos, rng.choice(INTERESTING_16))
        elif choice == 3 and len(buf) >= 4:
            pos = rng.randrange(len(buf) - 3)
            struct.pack_into(">I", buf, pos, rng.choice(INTERESTING_32))
        elif choice == 4 and len(buf) > 8:  # truncate (keep the 8-byte request prefix mostly)
            del buf[rng.randrange(8, len(buf)) :]
        elif choice == 5:  # insert random bytes
            buf[pos:pos] = rng.randbytes(rng.randrange(1, 16))
        elif choice == 6 and buf:  # duplicate a slice
            end = min(len(buf), pos + rng.randrange(1, 32))
            buf[pos:pos] = buf[pos:end]
        elif choice == 7 and corpus:  # splice with another request's tail
            other = rng.choice(corpus)
            cut = rng.randrange(len(other)) if other else 0
            buf = buf[:pos] + other[cut:]
    return bytes(buf)


def random_header_body(rng: random.Random, advertised: dict[int, tuple[int, int]]) -> bytes:
    key = rng.choice(sorted(advertised))
    lo, hi = advertised[key]
    header = struct.pack(">hhih", key, rng.randint(lo, hi), rng.randrange(1 << 31), 4) + b"fuzz" + b"\x00"
    return header + rng.randbytes(rng.randrange(0, 200))


# -- the broker side -------------------------------------------------------------------------------


class Target:
    def __init__(self, options: dict[str, Any], log_dir: str) -> None:
        self.broker = start_embedded_broker({"log_level": "WARNING", **options}, log_dir)
        host, port = self.broker.bootstrap.rsplit(":", 1)
        self.address = (host, int(port))
        self.log_offset = 0
        self.sock: socket.socket | None = None
        self.sasl = "acl_file" in options

    def connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=RESPONSE_TIMEOUT_S)
        return self.sock

    def reset(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = None

    def exchange(self, payload: bytes) -> str:
        """Send one framed request; 'answered', 'closed' or 'silent' (no answer in time)."""
        try:
            sock = self.connect()
            sock.sendall(INT32.pack(len(payload)) + payload)
            size = _recv(sock, 4)
            if size is None:
                self.reset()
                return "closed"
            (length,) = INT32.unpack(size)
            if length < 0 or _recv(sock, length) is None:
                self.reset()
                return "closed"
            return "answered"
        except TimeoutError:
            self.reset()
            return "silent"
        except OSError:
            self.reset()
            return "closed"

    def new_log(self) -> str:
        try:
            with open(self.broker.log_path, "rb") as fh:
                fh.seek(self.log_offset)
                data = fh.read()
        except OSError:
            return ""
        self.log_offset += len(data)
        return data.decode("utf-8", "replace")

    def alive(self) -> bool:
        if self.broker.process is None or self.broker.process.poll() is not None:
            return False
        try:
            with socket.create_connection(self.address, timeout=10) as sock:
                sock.sendall(INT32.pack(len(p := _frame(ApiVersionsRequest(), 0))) + p)
                return _recv(sock, 4) is not None
        except OSError:
            return False

    def rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.broker.process.pid}/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except (OSError, AttributeError):
            pass
        return 0.0

    def advertised(self) -> dict[int, tuple[int, int]]:
        with socket.create_connection(self.address, timeout=10) as sock:
            payload = _frame(ApiVersionsRequest(), 0)
            sock.sendall(INT32.pack(len(payload)) + payload)
            (length,) = INT32.unpack(_recv(sock, 4) or b"\0\0\0\0")
            response = ApiVersionsResponse.decode(_recv(sock, length) or b"", version=0, header=True)
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def stop(self) -> None:
        self.reset()
        self.broker.stop()


def _recv(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _signature(log: str) -> str:
    lines = [line for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if not line.startswith((" ", "Traceback"))]
    return (errors[-1] if errors else lines[-1] if lines else "?")[:300]


# -- main ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", default="fuzz-findings")
    parser.add_argument("--max-rss-mb", type=float, default=500.0)
    parser.add_argument("--sasl", action="store_true", help="fuzz a SASL listener (unauthenticated)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)  # noqa: S311 (reproducible fuzzing, not cryptography)
    out = Path(args.out)
    log_dir = str(out / "broker")
    os.makedirs(log_dir, exist_ok=True)
    options: dict[str, Any] = {}
    if args.sasl:
        acl = out / "acls.json"
        acl.write_text(json.dumps({"users": {"fuzz": "fuzz-pw"}, "acls": []}))
        options["acl_file"] = str(acl)
    load_handler_modules()
    target = Target(options, log_dir)
    findings: dict[str, dict[str, Any]] = {}
    counts = {"answered": 0, "closed": 0, "silent": 0}
    sent = 0
    started = time.monotonic()
    try:
        advertised = target.advertised()
        corpus = build_corpus(advertised)
        target.new_log()
        print(f"fuzzing {target.broker.bootstrap} for {args.seconds:g} s, seed {seed}, corpus {len(corpus)}")
        while time.monotonic() - started < args.seconds:
            kind = rng.random()
            if kind < 0.8:
                payload = mutate(rng, rng.choice(corpus), corpus)
            elif kind < 0.95:
                payload = random_header_body(rng, advertised)
            else:
                payload = rng.randbytes(rng.randrange(0, 64))
            outcome = target.exchange(payload)
            counts[outcome] += 1
            sent += 1
            if outcome == "closed" or sent % 500 == 0:
                log = target.new_log()
                if "unexpected error" in log or "Traceback" in log:
                    _record(findings, "handler exception", _signature(log), payload, log, out)
            down = target.broker.process is None or target.broker.process.poll() is not None
            if down or (outcome == "silent" and not target.alive()):
                _record(findings, "broker down or hung", "no answer to ApiVersions on a fresh connection",
                        payload, target.broker.log_tail(60), out)
                target.stop()
                target = Target(options, log_dir)
                target.new_log()
            if sent % 1000 == 0:
                rss = target.rss_mb()
                if rss > args.max_rss_mb:
                    _record(findings, "memory", f"RSS {rss:.0f} MB", payload, "", out)
    finally:
        target.stop()
    elapsed = time.monotonic() - started
    summary = {
        "seconds": round(elapsed, 1), "requests": sent, "per_second": round(sent / max(elapsed, 1e-9)),
        "seed": seed, "outcomes": counts, "findings": len(findings),
        "distinct": sorted(findings),
    }
    print(json.dumps(summary, indent=2))
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return 1 if findings else 0


def _record(findings: dict, kind: str, signature: str, payload: bytes, log: str, out: Path) -> None:
    key = f"{kind}: {signature}"
    if key in findings:
        findings[key]["count"] += 1
        return
    findings[key] = {"count": 1}
    index = len(findings)
    (out / f"finding-{index:03d}.txt").write_text(
        f"{key}\nframe (hex, without the size prefix): {payload.hex()}\n\n{log[-8000:]}\n"
    )
    print(f"FINDING {index}: {key}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
