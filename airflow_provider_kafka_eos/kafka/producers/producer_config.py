"""The connection's producer settings, honoured by each producer path or refused by name.

Why one module: a producer key in the connection (``compression.type``, ``batch.size``,
``acks`` ...) must never be silently dropped. The librdkafka path hands the keys to
confluent-kafka; the Arrow producer (``kafka/producers/arrow.py``) speaks the protocol itself, so
each key it can honour is translated here into :class:`ArrowProducerSettings`, and each it
cannot is refused with a :class:`ConfigError` naming the key and the producer path, on the
driver, before anything is written. Some keys are refused on both paths because they would
break the exactly-once guarantee (``acks`` other than all, ``enable.idempotence=false``) or
because the writer owns them (``transactional.id``, ``transaction.timeout.ms``).

Keys that are not producer keys (bootstrap, security, SASL/SSL, consumer and admin tuning) are
never refused here. ``docs/configuration/producer-settings.md`` has the table: key x path x what
happens (a test keeps it in step with :data:`PRODUCER_KEYS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.kafka.producers.compression import Codec, codec_for

__all__ = [
    "ARROW",
    "LIBRDKAFKA",
    "PRODUCER_KEYS",
    "ArrowProducerSettings",
    "arrow_producer_settings",
    "check_producer_settings",
]

ARROW = "arrow"
LIBRDKAFKA = "librdkafka"

# Every producer key the connection accepts (kafka/config.py), with its librdkafka alias folded in.
# The value says what the Arrow producer does with it; the docs table states the same in words.
PRODUCER_KEYS: dict[str, str] = {
    "compression.type": "honoured",
    "compression.codec": "honoured (alias of compression.type)",
    "compression.level": "honoured",
    "batch.size": "honoured",
    "batch.num.messages": "honoured",
    "linger.ms": "honoured",
    "queue.buffering.max.ms": "honoured (alias of linger.ms)",
    "queue.buffering.max.kbytes": "honoured",
    "queue.buffering.max.messages": "honoured",
    "message.max.bytes": "honoured",
    "acks": "all only",
    "request.required.acks": "all only (alias of acks)",
    "enable.idempotence": "true only",
    "delivery.timeout.ms": "honoured",
    "message.timeout.ms": "honoured (alias of delivery.timeout.ms)",
    "request.timeout.ms": "honoured",
    "client.id": "honoured",
    "retries": "honoured, > 0 only",
    "message.send.max.retries": "honoured, > 0 only (alias of retries)",
    "max.in.flight.requests.per.connection": "honoured, 1-5 only",
    "max.in.flight": "honoured, 1-5 only (alias)",
    "partitioner": "murmur2_random / murmur2 only",
    "allow.auto.create.topics": "honoured",
    "transactional.id": "refused (the naming strategy owns it)",
    "transaction.timeout.ms": "refused (write_exactly_once's transaction_timeout_ms owns it)",
}

# librdkafka's second names: giving both with different values is refused on both paths.
_ALIASES = (
    ("compression.type", "compression.codec"),
    ("linger.ms", "queue.buffering.max.ms"),
    ("acks", "request.required.acks"),
    ("delivery.timeout.ms", "message.timeout.ms"),
    ("retries", "message.send.max.retries"),
    ("max.in.flight.requests.per.connection", "max.in.flight"),
)
_JAVA_COMPATIBLE_PARTITIONERS = ("murmur2_random", "murmur2")
_MAX_IN_FLIGHT_WITH_IDEMPOTENCE = 5


@dataclass(frozen=True)
class ArrowProducerSettings:
    """What the Arrow producer does with the connection's producer keys (defaults: no key given).

    ``batch_bytes``: uncompressed bytes per record batch (``batch.size``); ``batch_records``: records
    per batch (``batch.num.messages``); ``buffer_bytes`` / ``buffer_records``: rows held before a
    send (``queue.buffering.max.kbytes`` / ``.messages``); ``linger_ms``: the longest buffered rows
    wait before they are sent (``linger.ms``; None: until the buffer is full or flushed);
    ``max_request_bytes``: the largest Produce request (``message.max.bytes`` / Java's
    ``max.request.size``; None: one batch per partition per request, no other bound).
    """

    codec: Codec = field(default_factory=Codec)
    batch_bytes: int = 1_000_000
    batch_records: int | None = None
    buffer_bytes: int = 32 * 1024 * 1024
    buffer_records: int | None = None
    linger_ms: int | None = None
    max_request_bytes: int | None = None
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    retries: int | None = None
    allow_auto_create_topics: bool = True


def _where(source: str, path: str) -> str:
    return f"{source} (producer path {path!r})"


def _int(settings: Mapping[str, Any], key: str, where: str, *, minimum: int) -> int | None:
    if key not in settings:
        return None
    value = settings[key]
    try:
        number = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise ConfigError(f"{where}: key {key!r} must be an integer >= {minimum}, got {value!r}")
    return number


def _bool(settings: Mapping[str, Any], key: str, where: str) -> bool | None:
    if key not in settings:
        return None
    value = settings[key]
    text = str(value).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ConfigError(f"{where}: key {key!r} must be true or false, got {value!r}")


def _first(settings: Mapping[str, Any], *keys: str, where: str) -> tuple[str, Any] | None:
    """The first of ``keys`` present (a librdkafka key and its alias): (key, value)."""
    given = [k for k in keys if k in settings]
    if len(given) > 1 and len({str(settings[k]) for k in given}) > 1:
        raise ConfigError(
            f"{where}: keys {' and '.join(repr(k) for k in given)} are aliases with different values; "
            "keep one"
        )
    return (given[0], settings[given[0]]) if given else None


def check_producer_settings(settings: Mapping[str, Any], path: str, *, source: str = "connection") -> None:
    """The refusals both producer paths share: what would break exactly-once, and what the writer owns.

    Called on the driver before anything is written (``spark/writer.py``), and again by each
    path when its producer is built.
    """
    where = _where(source, path)
    for pair in _ALIASES:
        _first(settings, *pair, where=where)
    for key, owner in (("transactional.id", "the naming strategy sets one per Spark partition"),
                       ("transaction.timeout.ms", "pass transaction_timeout_ms= to write_exactly_once")):
        if key in settings:
            raise ConfigError(f"{where}: key {key!r} cannot be set in the connection: {owner}; remove it")
    acks = _first(settings, "acks", "request.required.acks", where=where)
    if acks is not None and str(acks[1]).strip().lower() not in ("all", "-1"):
        raise ConfigError(
            f"{where}: key {acks[0]!r} = {acks[1]!r}: transactions need acks=all (a transactional producer "
            "waits for every in-sync replica); remove the key or set it to all"
        )
    if _bool(settings, "enable.idempotence", where) is False:
        raise ConfigError(
            f"{where}: key 'enable.idempotence' = false: transactions need an idempotent producer; remove "
            "the key or set it to true"
        )
    retries = _first(settings, "retries", "message.send.max.retries", where=where)
    if retries is not None and _int({retries[0]: retries[1]}, retries[0], where, minimum=0) == 0:
        raise ConfigError(
            f"{where}: key {retries[0]!r} = 0: an idempotent producer must be able to resend a batch "
            "(a lost answer would otherwise fail the task); remove the key or set it above 0"
        )
    in_flight = _first(settings, "max.in.flight.requests.per.connection", "max.in.flight", where=where)
    if in_flight is not None:
        number = _int({in_flight[0]: in_flight[1]}, in_flight[0], where, minimum=1)
        if number is not None and number > _MAX_IN_FLIGHT_WITH_IDEMPOTENCE:
            raise ConfigError(
                f"{where}: key {in_flight[0]!r} = {number}: an idempotent producer keeps order with at "
                f"most {_MAX_IN_FLIGHT_WITH_IDEMPOTENCE} requests in flight; set 1-5"
            )
    codec = _first(settings, "compression.type", "compression.codec", where=where)
    if codec is not None or "compression.level" in settings:
        codec_for(codec[1] if codec is not None else "none", settings.get("compression.level"), where=where)


def arrow_producer_settings(
    settings: Mapping[str, Any], *, source: str = "connection"
) -> ArrowProducerSettings:
    """The connection's producer keys as the Arrow producer honours them; ConfigError for the rest."""
    check_producer_settings(settings, ARROW, source=source)
    where = _where(source, ARROW)
    partitioner = settings.get("partitioner")
    if partitioner is not None and str(partitioner).strip() not in _JAVA_COMPATIBLE_PARTITIONERS:
        raise ConfigError(
            f"{where}: key 'partitioner' = {partitioner!r}: the Arrow producer places keyed records as "
            "Java's client does (murmur2) and spreads null keys sticky per batch; remove the key, set it "
            "to murmur2_random, or pass producer='librdkafka' to keep this partitioner"
        )
    defaults = ArrowProducerSettings()
    codec = _first(settings, "compression.type", "compression.codec", where=where)
    chosen_codec = codec_for(codec[1] if codec is not None else "none", settings.get("compression.level"),
                             where=where)
    batch_bytes = _int(settings, "batch.size", where, minimum=1) or defaults.batch_bytes
    max_request = _int(settings, "message.max.bytes", where, minimum=1000)
    if max_request is not None and "batch.size" not in settings:
        batch_bytes = min(batch_bytes, max_request)
    kbytes = _int(settings, "queue.buffering.max.kbytes", where, minimum=1)
    linger = _first(settings, "linger.ms", "queue.buffering.max.ms", where=where)
    delivery = _first(settings, "delivery.timeout.ms", "message.timeout.ms", where=where)
    retries = _first(settings, "retries", "message.send.max.retries", where=where)
    auto_create = _bool(settings, "allow.auto.create.topics", where)
    return ArrowProducerSettings(
        codec=chosen_codec,
        batch_bytes=batch_bytes,
        batch_records=_int(settings, "batch.num.messages", where, minimum=1),
        buffer_bytes=kbytes * 1024 if kbytes is not None else defaults.buffer_bytes,
        buffer_records=_int(settings, "queue.buffering.max.messages", where, minimum=1),
        linger_ms=_int({linger[0]: linger[1]}, linger[0], where, minimum=0) if linger else None,
        max_request_bytes=max_request,
        request_timeout_ms=(_int(settings, "request.timeout.ms", where, minimum=1)
                            or defaults.request_timeout_ms),
        delivery_timeout_ms=(_int({delivery[0]: delivery[1]}, delivery[0], where, minimum=1) if delivery
                             else defaults.delivery_timeout_ms),
        retries=_int({retries[0]: retries[1]}, retries[0], where, minimum=1) if retries else None,
        allow_auto_create_topics=defaults.allow_auto_create_topics if auto_create is None else auto_create,
    )
