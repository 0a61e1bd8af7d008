"""A ``client.properties`` file read exactly as Kafka's own tools read it.

Kafka's tools load ``--command-config`` with ``java.util.Properties.load(InputStream)``: the
bytes are ISO-8859-1, and ``\\uXXXX`` escapes, ``\\`` line continuations, ``=`` / ``:`` /
whitespace separators and ``#`` / ``!`` comments follow that method's rules. The parsing is
the ``javaproperties`` library's (a maintained, tested reimplementation of exactly that method;
see docs/dependencies.md), not ours. ``tests/kafka/test_java_properties_parity.py`` runs Java's
own ``Properties.load`` over a corpus and asserts both parses agree.

One refusal Java does not make: a file holding raw non-ASCII bytes that form UTF-8. Java would
read ``ä`` written in UTF-8 as the two characters ``Ã¤``, so a password holding it would be
rejected by the broker with nothing pointing at the file; we name the file and line instead and
say how to write the character so that Java and we read the same thing.
"""

from __future__ import annotations

from pathlib import Path

from airflow_provider_kafka_eos.kafka.errors import ConfigError

__all__ = ["parse_properties", "read_properties_file"]


def parse_properties(text: str, *, source: str = "client.properties") -> dict[str, str]:
    """Properties text (already decoded) parsed as ``Properties.load`` does; the last key wins."""
    # Imported here, not at the top: Spark executors import kafka/config.py (through the writer)
    # but never read a properties file, and their environment lists only the job-side packages
    # (spark/requirements.py); a top-level import made every task fail on a provider-less executor.
    import javaproperties

    try:
        return javaproperties.loads(text)
    except javaproperties.InvalidUEscapeError as exc:
        raise ConfigError(
            f"{source}: malformed \\uXXXX escape {exc.escape!r} (Java refuses this file too); "
            "write exactly four hex digits after \\u, or a double backslash for a literal one"
        ) from None


def read_properties_file(path: str | Path) -> dict[str, str]:
    """A ``.properties`` file parsed (ConfigError naming the file when it cannot be read)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the properties file ({exc.strerror or exc})") from None
    if not raw.isascii():
        try:
            utf8 = raw.decode("utf-8")
        except UnicodeDecodeError:
            utf8 = None  # ISO-8859-1 bytes: what Java reads, and so do we
        if utf8 is not None:
            line = next(n for n, text in enumerate(utf8.splitlines(), 1) if not text.isascii())
            raise ConfigError(
                f"{path}: line {line} holds non-ASCII characters written as UTF-8, which Kafka's Java "
                "tools read as ISO-8859-1 (different characters); write them as \\uXXXX escapes, "
                "as java.util.Properties.store does (e.g. \\u00e4 for \u00e4)"
            )
    return parse_properties(raw.decode("iso-8859-1"), source=str(path))
