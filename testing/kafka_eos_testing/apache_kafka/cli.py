"""``./run kafka``: a real Apache Kafka 4.4 cluster on loopback, in the foreground until SIGTERM/SIGINT.

Prints exactly one line on stdout, ``listening on HOST:PORT[,HOST:PORT...]`` (the bootstrap list,
one address per node), once every node answers Metadata and a transactional producer can
initialise. Node logs go to the data dir; a failure prints one message on stderr and exits 1.

Secured modes (certificates made for this run in DATA_DIR/tls, never reused: ca.pem signs
server.pem, whose names are the node hosts, localhost and 127.0.0.1):

  --tls --sasl --sasl-mechanism SCRAM-SHA-512   SASL_SSL with SCRAM; the ACL file's users (or
        admin/admin-secret, a super user) are added as SCRAM credentials at format time
  --mtls [--acl-file F]   SSL with required client certificates; the principal is the
        certificate's subject DN (User:CN=...,O=...), ACLs name it; DATA_DIR/tls/client-admin.pem
        (User:CN=admin,O=kafka-eos) is a super user
  --tls   SSL without client authentication (no ACLs)
  --tls --sasl-mechanism OAUTHBEARER   SASL_SSL with OAUTHBEARER validated by Kafka's OIDC support
        against a loopback identity provider this command serves (JWKS + client-credentials token
        endpoint, printed on stderr); its clients are the ACL file's users (or admin/admin-secret),
        the user name as client id and the password as client secret; the principal is User:<client id>

A client of a TLS mode sets security.protocol (SSL or SASL_SSL) and ssl.ca.location=DATA_DIR/tls/ca.pem;
docs/security.md shows whole client configurations.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .cluster import ApacheKafkaCluster, KafkaStartError
from .jars import JarFetchError
from .options import KafkaOptions


def _listen(value: str) -> list[tuple[str, int]]:
    addresses = []
    for item in value.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise argparse.ArgumentTypeError(f"expected HOST:PORT[,HOST:PORT...], got {value!r}")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="./run kafka",
        description=__doc__.split("\n\n")[0].splitlines()[0],
        epilog="\n\n".join(__doc__.split("\n\n")[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    parser.add_argument("--data-dir", default=None, help="node storage and logs (default: a new temp dir)")
    parser.add_argument(
        "--listen", type=_listen, default=None, help="HOST:PORT per node (default: free ports)"
    )
    parser.add_argument("--two-phase-commit", action="store_true", help="transaction.two.phase.commit.enable")
    parser.add_argument(
        "--sasl", action="store_true", help="SASL/PLAIN + StandardAuthorizer (super user admin)"
    )
    parser.add_argument(
        "--acl-file", default=None, help="users/super_users/acls JSON (implies --sasl unless --mtls)"
    )
    parser.add_argument(
        "--sasl-mechanism",
        choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
        default=None,
        help="the client listener's SASL mechanism (implies --sasl; SCRAM users added at format time)",
    )
    parser.add_argument("--tls", action="store_true", help="the client listener speaks TLS (SSL / SASL_SSL)")
    parser.add_argument(
        "--mtls", action="store_true", help="TLS with required client certificates; principal = subject DN"
    )
    parser.add_argument("--transaction-max-timeout-ms", type=int, default=900_000)
    parser.add_argument(
        "--abort-check-interval-ms",
        type=int,
        default=10_000,
        help="transaction.abort.timed.out.transaction.cleanup.interval.ms",
    )
    parser.add_argument("--transaction-version", type=int, choices=(1, 2), default=2)
    parser.add_argument("--partitions", type=int, default=1, help="num.partitions of auto-created topics")
    parser.add_argument("--no-auto-create-topics", dest="auto_create_topics", action="store_false")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    options = KafkaOptions(
        nodes=args.nodes,
        data_dir=args.data_dir,
        listen=args.listen or [],
        two_phase_commit=args.two_phase_commit,
        sasl=(args.sasl or args.sasl_mechanism is not None) and not args.mtls,
        acl_file=args.acl_file,
        tls=args.tls,
        mtls=args.mtls,
        sasl_mechanism=args.sasl_mechanism or "PLAIN",
        transaction_max_timeout_ms=args.transaction_max_timeout_ms,
        abort_check_interval_ms=args.abort_check_interval_ms,
        transaction_version=args.transaction_version,
        default_partitions=args.partitions,
        auto_create_topics=args.auto_create_topics,
    )
    idp = None
    if options.sasl_mechanism == "OAUTHBEARER":
        from .oidc import OidcServer

        idp = OidcServer()
        for name, secret in options.security_doc()["users"].items():
            idp.add_client(name, secret)
        options.oidc_jwks_url = idp.jwks_url
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        options.validate()
        cluster = ApacheKafkaCluster(options)
    except (JarFetchError, KafkaStartError, ValueError, OSError) as exc:
        print(f"run kafka: {exc}", file=sys.stderr, flush=True)
        if idp is not None:
            idp.close()
        return 1
    try:
        print(f"data and node logs in {cluster.data_dir}", file=sys.stderr, flush=True)
        if idp is not None:
            print(f"OAUTHBEARER token endpoint {idp.token_url}", file=sys.stderr, flush=True)
        if options.uses_tls:
            print(
                f"{options.client_protocol}: CA {cluster.tls_dir / 'ca.pem'}", file=sys.stderr, flush=True
            )
        print(f"listening on {cluster.bootstrap}", flush=True)
        stop.wait()
    finally:
        cluster.stop()
        if idp is not None:
            idp.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
