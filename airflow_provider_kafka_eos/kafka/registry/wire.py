"""The Confluent wire format, both ways: the bytes before each record's payload.

What Kafka's serializers write and its deserializers read::

    byte 0      magic byte 0
    bytes 1-4   the schema id, big-endian
    (Protobuf)  the message indexes: a zig-zag varint count and indexes; [0] is the single byte 0
    the rest    the encoded record (Avro binary, Protobuf, or JSON text)

One owner for the framing: the encoder writes it (:func:`wire_header`), the Kafka input's decoder
reads it (:func:`read_wire_header`), so the two cannot drift apart.
"""

from __future__ import annotations

import struct

from airflow_provider_kafka_eos.kafka.errors import PoisonRecordError

__all__ = ["MAGIC_BYTE", "read_wire_header", "wire_header"]

MAGIC_BYTE = 0
_NOT_FRAMED = "it is not in the Confluent wire format (no magic byte 0 and schema id)"


def wire_header(schema_id: int, *, protobuf_indexes: tuple[int, ...] | None = None) -> bytes:
    """The bytes before each record's payload."""
    header = struct.pack(">bI", MAGIC_BYTE, schema_id)
    if protobuf_indexes is not None:
        # Confluent's shortcut: the first message ([0]) is a single 0 byte
        header += b"\x00" if list(protobuf_indexes) == [0] else _zigzag_varints(
            [len(protobuf_indexes), *protobuf_indexes])
    return header


def read_wire_header(raw: bytes, *, protobuf: bool = False) -> tuple[int, tuple[int, ...] | None, int]:
    """(the schema id, the Protobuf message indexes or None, where the payload starts) of a framed
    record; a record that is not framed raises :class:`PoisonRecordError` with the cause only (the
    decoder adds where the record is)."""
    if len(raw) < 5 or raw[0] != MAGIC_BYTE:
        raise PoisonRecordError(_NOT_FRAMED)
    schema_id = int.from_bytes(raw[1:5], "big")
    if not protobuf:
        return schema_id, None, 5
    count, position = _read_zigzag(raw, 5)
    if count == 0:  # the shortcut: the single byte 0 is the first message, [0]
        return schema_id, (0,), position
    if count < 0 or count > len(raw):
        raise PoisonRecordError(f"{_NOT_FRAMED}: its Protobuf message index count {count} is not valid")
    indexes = []
    for _ in range(count):
        index, position = _read_zigzag(raw, position)
        indexes.append(index)
    return schema_id, tuple(indexes), position


def _zigzag_varints(values: list[int]) -> bytes:
    out = bytearray()
    for value in values:
        value = (value << 1) ^ (value >> 63)
        while value & ~0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


def _read_zigzag(raw: bytes, position: int) -> tuple[int, int]:
    """One zig-zag varint at ``position``: (its value, the position after it)."""
    value = shift = 0
    while True:
        if position >= len(raw) or shift > 63:
            raise PoisonRecordError(f"{_NOT_FRAMED}: its Protobuf message indexes end early")
        byte = raw[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), position
