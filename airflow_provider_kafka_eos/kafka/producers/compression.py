"""Record-batch compression for the Arrow producer: Kafka's codec ids and the codec packages.

Why here: ``compression.type`` in the connection must mean the same on both producer paths.
librdkafka compresses inside confluent-kafka; the Arrow producer compresses each RecordBatch v2's
records section itself (``kafka/producers/record_batch.py``) and sets the codec in the batch attributes,
exactly as Kafka's Java client does. The codecs come from the packages the Kafka Python
ecosystem uses (kafka-python's ``kafka/codec.py`` and its ``lz4`` / ``snappy`` / ``zstd``
extras): the standard library's gzip, ``lz4`` (LZ4 frames with independent blocks, which is
what Kafka's ``KafkaLZ4BlockInputStream`` reads), ``python-snappy`` (in the xerial block framing
that Java's ``SnappyOutputStream`` writes, through kafka-python's ``snappy_encode``) and
``zstandard``. ``docs/dependencies.md`` says why each is a dependency.

Levels follow librdkafka's ``compression.level`` (the connection's keys are librdkafka keys):
-1 is the codec's default; gzip 0-9, lz4 0-12, snappy has none (0 or -1), zstd 1-22.
"""

from __future__ import annotations

import gzip
import importlib
from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_kafka_eos.kafka.errors import ConfigError

__all__ = ["CODECS", "Codec", "codec_for"]

DEFAULT_LEVEL = -1


@dataclass(frozen=True)
class _CodecSpec:
    attribute: int  # the low 3 bits of a v2 batch's attributes
    levels: range | None  # None: the codec takes no level
    default_level: int
    module: str | None  # the package that must import (None: standard library)
    distribution: str | None  # what to pip install when it does not


CODECS: dict[str, _CodecSpec] = {
    "none": _CodecSpec(0, None, 0, None, None),
    "gzip": _CodecSpec(1, range(0, 10), 6, None, None),
    "snappy": _CodecSpec(2, None, 0, "snappy", "python-snappy"),
    "lz4": _CodecSpec(3, range(0, 13), 0, "lz4.frame", "lz4"),
    "zstd": _CodecSpec(4, range(1, 23), 3, "zstandard", "zstandard"),
}


@dataclass(frozen=True)
class Codec:
    """One configured codec: its name, its attribute bits and the level to compress at."""

    name: str = "none"
    level: int = DEFAULT_LEVEL

    @property
    def attribute(self) -> int:
        return CODECS[self.name].attribute

    @property
    def compresses(self) -> bool:
        return self.name != "none"

    def compress(self, data: bytes) -> bytes:
        """The records section compressed as Kafka's Java client writes it for this codec."""
        return _compressor(self.name, self.level)(data)


def codec_for(name: object, level: object = None, *, where: str) -> Codec:
    """Validate ``compression.type`` / ``compression.level`` and check the codec's package imports.

    ``where`` names the setting's source and producer path in the error (``ConfigError`` naming
    the key, the value and the next step), raised before anything is written.
    """
    codec = str(name).strip().lower()
    if codec not in CODECS:
        raise ConfigError(
            f"{where}: key 'compression.type' = {name!r} is not a Kafka codec; use one of "
            f"{', '.join(CODECS)}"
        )
    spec = CODECS[codec]
    chosen = DEFAULT_LEVEL
    if level is not None:
        try:
            chosen = int(level)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: key 'compression.level' must be an integer, got {level!r}") from None
        if chosen != DEFAULT_LEVEL:
            allowed = spec.levels
            if allowed is None and chosen != 0:
                raise ConfigError(
                    f"{where}: key 'compression.level' = {chosen} but {codec} takes no level; remove "
                    "the key or set it to -1"
                )
            if allowed is not None and chosen not in allowed:
                raise ConfigError(
                    f"{where}: key 'compression.level' = {chosen} is outside {codec}'s range "
                    f"{allowed.start}-{allowed.stop - 1} (or -1 for its default)"
                )
    if spec.module is not None:
        try:
            importlib.import_module(spec.module)
        except ImportError:
            raise ConfigError(
                f"{where}: key 'compression.type' = {codec} needs the {spec.distribution} package, which "
                f"does not import here; pip install {spec.distribution} (part of "
                "airflow-provider-kafka-eos[spark])"
            ) from None
    return Codec(codec, chosen)


def _compressor(name: str, level: int) -> Callable[[bytes], bytes]:
    spec = CODECS[name]
    chosen = spec.default_level if level == DEFAULT_LEVEL else level
    if name == "none":
        return bytes
    if name == "gzip":
        return lambda data: gzip.compress(data, compresslevel=chosen, mtime=0)
    if name == "snappy":
        from kafka.codec import snappy_encode  # xerial framing, as Java's SnappyOutputStream writes

        return snappy_encode
    if name == "lz4":
        import lz4.frame

        # Kafka reads LZ4 frames with independent blocks only (KafkaLZ4BlockInputStream).
        return lambda data: lz4.frame.compress(data, compression_level=chosen, block_linked=False)
    import zstandard

    compressor = zstandard.ZstdCompressor(level=chosen)
    return compressor.compress
