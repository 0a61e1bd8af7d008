"""``sasl.jaas.config`` values read exactly as Kafka's ``JaasConfig`` reads them.

Kafka's client tokenizes the value with ``java.io.StreamTokenizer`` (``//`` and ``/* */``
comments, ``-``, ``_`` and ``$`` added to the word characters, numbers parsed) and expects
``<LoginModule> <flag> key=value ... ;``. A value is a word or a single- or double-quoted
string whose backslash escapes are StreamTokenizer's (``\\n``, octal ``\\101``, ``\\"``, any
other ``\\x`` is ``x``); an unquoted number is *not* a value (Kafka refuses ``password=123``).
No Python library implements StreamTokenizer, so this is the one hand-written tokenizer of the
project; ``tests/kafka/test_java_properties_parity.py`` runs Kafka's own ``JaasConfig`` over a
corpus and asserts both parses agree, value for value and refusal for refusal.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["JaasEntry", "JaasSyntaxError", "parse_jaas_config"]

_EOF = -1
_WORD = -3
_NUMBER = -2
_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\x0c", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


class JaasSyntaxError(ValueError):
    """The value is not a JAAS entry Kafka accepts; the text is Kafka's own reason."""


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry: class name, control flag (upper case) and options."""

    login_module: str
    flag: str
    options: dict[str, str]


def _is_ws(ch: str) -> bool:
    return ord(ch) <= 0x20


def _is_digit(ch: str) -> bool:
    # parseNumbers(): 0-9, '.' and '-'.
    return ch.isascii() and (ch.isdigit() or ch in ".-")


def _is_alpha(ch: str) -> bool:
    # StreamTokenizer's defaults (a-z, A-Z, 160-255, anything above 255) plus JaasConfig's - _ $.
    code = ord(ch)
    return (
        ("a" <= ch <= "z") or ("A" <= ch <= "Z") or code >= 160 or ch in "-_$"
    )


class _Tokenizer:
    """``java.io.StreamTokenizer`` as ``JaasConfig`` configures it (only what it uses)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.ttype: int | str = _EOF
        self.sval: str | None = None

    def _read(self) -> str | None:
        if self.pos >= len(self.text):
            self.pos += 1
            return None
        ch = self.text[self.pos]
        self.pos += 1
        return ch

    def _unread(self, ch: str | None) -> None:
        self.pos -= 1

    def next(self) -> int | str:
        self.sval = None
        c = self._read()
        while c is not None and _is_ws(c):
            c = self._read()
        if c is None:
            self.ttype = _EOF
            return _EOF
        if _is_digit(c):
            if c == "-":
                d = self._read()
                if d is None or not (d == "." or (d.isascii() and d.isdigit())):
                    self._unread(d)
                    self.ttype = "-"
                    return "-"
                c = d
            seen_dot = False
            while c is not None and ((c.isascii() and c.isdigit()) or (c == "." and not seen_dot)):
                seen_dot = seen_dot or c == "."
                c = self._read()
            self._unread(c)
            self.ttype = _NUMBER
            return _NUMBER
        if _is_alpha(c):
            start = self.pos - 1
            while c is not None and (_is_alpha(c) or _is_digit(c)):
                c = self._read()
            self._unread(c)
            self.sval = self.text[start : self.pos]
            self.ttype = _WORD
            return _WORD
        if c in "\"'":
            return self._quoted(c)
        if c == "/":
            d = self._read()
            if d == "*":
                prev = None
                while True:
                    d = self._read()
                    if d is None:
                        self.ttype = _EOF
                        return _EOF
                    if d == "/" and prev == "*":
                        return self.next()
                    prev = d
            # '//' and a lone '/' (the default comment character) both comment out the line.
            while d is not None and d not in "\n\r":
                d = self._read()
            self._unread(d)
            return self.next()
        self.ttype = c
        return c

    def _quoted(self, quote: str) -> str:
        out: list[str] = []
        d = self._read()
        while d is not None and d != quote and d not in "\n\r":
            if d == "\\":
                c = self._read()
                if c is not None and "0" <= c <= "7":
                    value = ord(c) - 48
                    c2 = self._read()
                    if c2 is not None and "0" <= c2 <= "7":
                        value = (value << 3) + ord(c2) - 48
                        c3 = self._read()
                        if c3 is not None and "0" <= c3 <= "7" and c <= "3":
                            value = (value << 3) + ord(c3) - 48
                            d = self._read()
                        else:
                            d = c3
                    else:
                        d = c2
                    out.append(chr(value))
                    continue
                if c is None:
                    # Java appends the EOF marker (-1) cast to a char, then stops.
                    out.append("\uffff")
                    d = None
                    break
                out.append(_ESCAPES.get(c, c))
                d = self._read()
            else:
                out.append(d)
                d = self._read()
        if d != quote:
            self._unread(d)
        self.sval = "".join(out)
        self.ttype = quote
        return quote


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """Every login module entry of ``text``, or :class:`JaasSyntaxError` with Kafka's reason."""
    tok = _Tokenizer(text)
    entries: list[JaasEntry] = []
    while tok.next() != _EOF:
        module = tok.sval
        if tok.next() == _EOF:
            raise JaasSyntaxError("Login module control flag not specified in JAAS config")
        flag = (tok.sval or "").upper()
        if tok.sval is None or flag not in _FLAGS:
            raise JaasSyntaxError(f"Invalid login module control flag '{tok.sval}' in JAAS config")
        options: dict[str, str] = {}
        while tok.next() != _EOF and tok.ttype != ";":
            key = tok.sval
            if tok.next() != "=" or tok.next() == _EOF or tok.sval is None:
                raise JaasSyntaxError(f"Value not specified for key '{key}' in JAAS config")
            options[key if key is not None else "null"] = tok.sval
        if tok.ttype != ";":
            raise JaasSyntaxError("JAAS config entry not terminated by semi-colon")
        entries.append(JaasEntry(module if module is not None else "null", flag, options))
    if not entries:
        raise JaasSyntaxError("Login module not specified in JAAS config")
    return entries
