"""One validator for every value a user hands us: the CLI, the manual DAG's Params, operator
arguments and manifests all call these, so a bad value is refused with the same words wherever
it came in, before anything is sent to Kafka.

Why these rules:

* **Transactional ids and prefixes** travel as Kafka protocol ``STRING``s: UTF-8, at most
  ``Short.MAX_VALUE`` (32767) bytes (the Java client and broker throw ``SchemaException``
  "String length N is larger than the maximum string length" beyond it; the broker checks no
  other limit). A lone surrogate (``"\\ud800"``, from a manifest escape or undecodable argv
  bytes) cannot be encoded at all: kafka-python fails inside its network thread and, before
  this module, the CLI waited forever. A prefix leaves room for the suffix a naming strategy
  appends (``-<partition>-<checkpoint>``).
* **Durations** must be positive where they bound a wait (``--timeout 0s`` used to mean "the
  default", silently) and non-negative where they filter (``--min-age 0s`` = everything).
* **Topics** follow Kafka's own rule (``[a-zA-Z0-9._-]``, at most 249 characters).
* **Pipeline ids** name the pipeline's folder in the manifest store (``<base>/<pipeline_id>/``):
  one path segment (no ``/`` or ``\\``, not ``.`` or ``..``), no control characters, at most 255
  bytes of UTF-8 (a file name on common file systems).
* **Input ids** name the batch a run reads; they are shown verbatim in logs and the UI: no control
  characters, at most 1024 characters (longer is a payload, not a name).

One function per input, and each input is checked at its first door (the operator's
``__init__`` for values that are not templates, its ``execute`` for rendered ones, the CLI's
parse) and by the same function wherever it arrives after (the Spark driver, the manifest
reader), so a value the driver would refuse never gets as far as ``spark-submit``.

Every function raises :class:`~airflow_provider_kafka_eos.kafka.errors.UsageError` (a
``KafkaEosError``) naming the field, the offending value (escaped, so a control character
cannot rewrite the terminal) and what would be accepted.
"""

from __future__ import annotations

import math
import re
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import UsageError

__all__ = [
    "MAX_INPUT_ID_CHARS",
    "MAX_KAFKA_STRING_BYTES",
    "MAX_PIPELINE_ID_BYTES",
    "MAX_PREFIX_BYTES",
    "MAX_TOPIC_CHARS",
    "parse_duration_ms",
    "validate_flag",
    "validate_input_id",
    "validate_pipeline_id",
    "validate_positive_ms",
    "validate_prefix",
    "validate_topic",
    "validate_transactional_id",
]

# Kafka protocol STRING: int16 length, so at most Short.MAX_VALUE bytes of UTF-8.
MAX_KAFKA_STRING_BYTES = 32767
# Room a prefix leaves for the naming strategy's suffix: "-" + partition + "-" + checkpoint id
# (two 20-digit integers and separators fit in 64 bytes with margin).
SUFFIX_ROOM_BYTES = 64
MAX_PREFIX_BYTES = MAX_KAFKA_STRING_BYTES - SUFFIX_ROOM_BYTES
# Kafka's Topic.MAX_NAME_LENGTH and legal characters.
MAX_TOPIC_CHARS = 249
_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
# A pipeline id is one folder name of the manifest store: 255 bytes is ext4's / XFS's NAME_MAX.
MAX_PIPELINE_ID_BYTES = 255
# An input identity names a batch; longer than this is a payload, not a name (and it is shown in
# every log line and form that mentions the checkpoint).
MAX_INPUT_ID_CHARS = 1024

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# Kafka's int32 millisecond fields (timeouts) hold at most this (about 24 days).
MAX_DURATION_MS = 2**31 - 1


def _shown(value: Any, limit: int = 80) -> str:
    """A safe, short rendering of a user value for an error message."""
    text = value if isinstance(value, str) else repr(value)
    text = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return "'" + text[:limit] + ("..." if len(text) > limit else "") + "'"


def _kafka_string(value: Any, field: str, max_bytes: int, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{field} must be a string, got {type(value).__name__}")
    if not value and not allow_empty:
        raise UsageError(f"{field} must not be empty")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"{field} {_shown(value)} is not valid Unicode (character {exc.start} is a lone surrogate, "
            "e.g. from undecodable bytes or a '\\ud800' escape); Kafka ids must be UTF-8 text"
        ) from None
    if size > max_bytes:
        why = "" if max_bytes == MAX_KAFKA_STRING_BYTES else " minus room for the naming suffix"
        raise UsageError(
            f"{field} is {size} bytes of UTF-8; Kafka allows at most {max_bytes} bytes "
            f"(the protocol's STRING limit{why})"
        )
    return value


def validate_transactional_id(value: Any, *, field: str = "transactional id") -> str:
    """A transactional id Kafka can carry: non-empty UTF-8 text of at most 32767 bytes."""
    return _kafka_string(value, field, MAX_KAFKA_STRING_BYTES)


def validate_prefix(value: Any, *, field: str = "transactional-id prefix") -> str:
    """A transactional-id prefix: like an id, with room for the naming strategy's suffix, and no
    blanks around it (they would be invisible in every id and log line).

    The one rule for a pipeline's prefix and for a prefix that selects ids (the CLI's ``--prefix``,
    the sensor's and the abort operator's ``prefixes``). A trailing ``-`` is allowed: ids are
    parsed from their last two dashes, so ``orders-`` + ``-0-1`` reads back as prefix ``orders-``.
    """
    text = _kafka_string(value, field, MAX_PREFIX_BYTES)
    if text != text.strip():
        raise UsageError(f"{field} {_shown(text)} has blanks around it; remove them")
    return text


def validate_pipeline_id(value: Any, *, field: str = "pipeline_id") -> str:
    """A pipeline id: one folder name of the manifest store, also the default transactional-id prefix."""
    text = _kafka_string(value, field, MAX_PIPELINE_ID_BYTES)
    if "/" in text or "\\" in text or text in (".", ".."):
        raise UsageError(f"{field} {_shown(text)} must be one folder name of the manifest store (no '/' or "
                         "'\\', not '.' or '..')")
    if _control(text) is not None:
        raise UsageError(f"{field} {_shown(text)} holds a control character")
    return text


def validate_input_id(value: Any, *, field: str = "input_id") -> str:
    """The input identity as recorded (surrounding blanks removed), or UsageError naming ``field``.

    Refused: not a string, empty (an empty identity would make every run "the same input"),
    longer than :data:`MAX_INPUT_ID_CHARS`, or holding control characters (log lines and the
    Airflow UI show it verbatim).
    """
    if not isinstance(value, str):
        raise UsageError(f"{field} must be a string naming the run's input (e.g. the batch), "
                         f"got {type(value).__name__}", runbook="duplicate-input")
    text = value.strip()
    if not text:
        raise UsageError(f"{field} is empty: name the input this run reads (e.g. the batch name); nothing "
                         "was written", runbook="duplicate-input")
    if len(text) > MAX_INPUT_ID_CHARS:
        raise UsageError(f"{field} is {len(text)} characters, more than {MAX_INPUT_ID_CHARS}: name the input "
                         "(e.g. a digest of the file list), do not inline it; nothing was written",
                         runbook="duplicate-input")
    bad = _control(text)
    if bad is not None:
        raise UsageError(f"{field} holds the control character {bad!r}; nothing was written",
                         runbook="duplicate-input")
    return text


def _control(text: str) -> str | None:
    """The first control character of ``text`` (None: there is none)."""
    return next((ch for ch in text if ord(ch) < 32 or ord(ch) == 127), None)


def validate_topic(value: Any, *, field: str = "topic") -> str:
    """A Kafka topic name: 1..249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``."""
    if not isinstance(value, str) or not value:
        raise UsageError(f"{field} must be a non-empty string")
    if len(value) > MAX_TOPIC_CHARS or not _TOPIC.match(value) or value in (".", ".."):
        raise UsageError(
            f"{field} {_shown(value)} is not a legal Kafka topic name (1..{MAX_TOPIC_CHARS} characters "
            "of a-z A-Z 0-9 . _ -)"
        )
    return value


def parse_duration_ms(
    text: str | int | None, *, what: str = "--min-age", positive: bool = False, max_ms: int | None = None
) -> int | None:
    """``15m`` -> 900000. Units ms/s/m/h/d are required (a bare number is ambiguous).

    ``None`` / ``""`` -> ``None`` (not given). ``positive=True`` for durations that bound a
    wait: zero is refused (it never meant "no wait", it meant a silent default); ``max_ms``
    caps it (timeouts that end up in Kafka's int32 fields).
    """
    if text is None or text == "":
        return None
    if isinstance(text, bool):
        raise UsageError(f"{what} must be a duration like 90s, 15m, 2h or 1d (got {text!r})")
    if isinstance(text, int):
        value = text
    else:
        if not isinstance(text, str):
            raise UsageError(f"{what} must be a duration like 90s, 15m, 2h or 1d (got {_shown(text)})")
        stripped = text.strip()
        if stripped.startswith("-"):
            raise UsageError(f"{what} must not be negative, got {_shown(text)}")
        match = _DURATION.match(stripped)
        if not match:
            raise UsageError(f"{what} must be a duration like 90s, 15m, 2h or 1d (got {_shown(text)})")
        amount = float(match.group(1))
        if not math.isfinite(amount):
            raise UsageError(f"{what} is not a finite duration (got {_shown(text)})")
        value = int(amount * _UNIT_MS[match.group(2).lower()])
    if value < 0:
        raise UsageError(f"{what} must not be negative, got {value} ms")
    if positive and value <= 0:
        raise UsageError(f"{what} must be positive (got {_shown(text)}); e.g. 10s")
    if max_ms is not None and value > max_ms:
        raise UsageError(f"{what} is too long ({value} ms; at most {max_ms} ms)")
    return value


def validate_flag(value: Any, *, field: str) -> bool:
    """A templated flag: a bool, or its rendering ("True", "false", "1", "" ...); anything else refused
    (a typo must not silently mean false)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if value is not None else ""
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", "", "none"):
        return False
    raise UsageError(f"{field} must be true or false, got {value!r}")


def validate_positive_ms(value: Any, *, field: str) -> int:
    """A positive integer number of milliseconds (a timeout), within Kafka's int32 fields."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{field} must be an integer number of milliseconds, got {_shown(value)}")
    if value <= 0:
        raise UsageError(f"{field} must be positive, got {value}")
    if value > MAX_DURATION_MS:
        raise UsageError(f"{field} must be at most {MAX_DURATION_MS} ms, got {value}")
    return value
