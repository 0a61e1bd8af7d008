"""``kafka-eos-devbroker``: run the embedded broker in the foreground until SIGTERM/SIGINT.

Prints exactly one line, ``listening on HOST:PORT``, once clients can connect (the pytest
fixture and scripts wait for it). Listens on loopback unless told otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from .broker import Broker, BrokerConfig, BrokerStartupError, lock_data_dir


def _listen_address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (e.g. 127.0.0.1:0), got {value!r}")
    return host.strip("[]"), int(port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka-eos-devbroker", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--listen",
        type=_listen_address,
        default=("127.0.0.1", 0),
        help="HOST:PORT to listen on (default 127.0.0.1:0 = a free loopback port)",
    )
    parser.add_argument("--node-id", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=1, help="partitions of auto-created topics")
    parser.add_argument("--data-dir", default=None, help="persist logs, offsets and transactions here")
    parser.add_argument("--transaction-max-timeout-ms", type=int, default=900000)
    parser.add_argument(
        "--abort-check-interval-ms",
        type=int,
        default=10000,
        help="transaction.abort.timed.out.transaction.cleanup.interval.ms",
    )
    parser.add_argument("--transaction-version", type=int, choices=(1, 2), default=2)
    parser.add_argument(
        "--two-phase-commit",
        action="store_true",
        help="transaction.two.phase.commit.enable (and advertise InitProducerId v6)",
    )
    parser.add_argument(
        "--acl-file", default=None, help="JSON users/ACLs; turns on SASL/PLAIN and the authorizer"
    )
    parser.add_argument("--transactional-id-expiration-ms", type=int, default=604800000)
    parser.add_argument("--no-auto-create-topics", dest="auto_create_topics", action="store_false")
    parser.add_argument(
        "--no-transaction-partition-verification",
        dest="transaction_partition_verification",
        action="store_false",
        help="transaction.partition.verification.enable=false: Produce below v12 may append a "
        "transactional batch to a partition its coordinator does not know (a hanging transaction)",
    )
    parser.add_argument(
        "--marker-delay-ms",
        type=int,
        default=0,
        help="write transaction markers this long after EndTxn (Kafka writes them asynchronously; "
        "meanwhile the id answers CONCURRENT_TRANSACTIONS)",
    )
    parser.add_argument(
        "--socket-request-max-bytes", type=int, default=100 * 1024 * 1024,
        help="largest request frame accepted (Kafka's socket.request.max.bytes)",
    )
    parser.add_argument(
        "--max-connections", type=int, default=1000,
        help="connections beyond this are closed at once (Kafka's max.connections)",
    )
    parser.add_argument("--log-level", default="WARNING")
    return parser


def config_from_args(args: argparse.Namespace) -> BrokerConfig:
    host, port = args.listen
    return BrokerConfig(
        host=host,
        port=port,
        node_id=args.node_id,
        default_partitions=args.partitions,
        data_dir=args.data_dir,
        transaction_max_timeout_ms=args.transaction_max_timeout_ms,
        abort_check_interval_ms=args.abort_check_interval_ms,
        transaction_version=args.transaction_version,
        two_phase_commit=args.two_phase_commit,
        acl_file=args.acl_file,
        transactional_id_expiration_ms=args.transactional_id_expiration_ms,
        auto_create_topics=args.auto_create_topics,
        transaction_partition_verification=args.transaction_partition_verification,
        marker_delay_ms=args.marker_delay_ms,
        socket_request_max_bytes=args.socket_request_max_bytes,
        max_connections=args.max_connections,
    )


async def serve(config: BrokerConfig) -> None:
    data_dir_lock = lock_data_dir(config.data_dir) if config.data_dir else None  # noqa: F841 - held until exit
    broker = Broker(config)
    try:
        await broker.start()
    except BaseException:
        await broker.stop()
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"listening on {broker.host}:{broker.port}", flush=True)
    try:
        await stop.wait()
    finally:
        await broker.stop()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        import uvloop

        run = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a speed-up, not a requirement
        run = asyncio.run
    try:
        run(serve(config_from_args(args)))
    except BrokerStartupError as exc:
        print(f"kafka-eos-devbroker: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
