"""External links of the docs (docs/**/*.md) and the README: listed, and checked without a network.

``mkdocs build --strict`` (test_docs_site.py) checks the links *between* pages; it never looks at
an external URL. Here every external link (Markdown link targets, autolinks and bare URLs in prose;
URLs inside code blocks and code spans are commands and examples, not links) is checked at test
time for what needs no network: well-formed https with a real host name; a link into this
project's repository names a file (``blob/``) or folder (``tree/``) that exists in the checkout,
so a moved or deleted page fails here; no page is linked under two spellings (one of them is a
redirect, i.e. a moved page); no link uses a location known to have moved.

Fetching the URLs needs outbound HTTPS, which the build machine lacks (only package registries
answer there), so it is opt-in: ``KAFKA_EOS_CHECK_LINKS=1`` fetches each page once and reports
the ones that fail or redirect permanently (docs/dependencies.md, "External links").
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest

from airflow_provider_kafka_eos import PROJECT_URL

ROOT = Path(__file__).resolve().parents[2]
CHECK_LINKS_ENV = "KAFKA_EOS_CHECK_LINKS"

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_URL = re.compile(r"https?://[^\s<>()\[\]`\"']+")
# Locations that moved for good; a link to the old one works only while the redirect lasts.
MOVED = {
    "https://github.com/apache/airflow/blob/master/": "https://github.com/apache/airflow/blob/main/",
    "https://github.com/apache/airflow/tree/master/": "https://github.com/apache/airflow/tree/main/",
    "https://airflow.readthedocs.io/": "https://airflow.apache.org/docs/",
    "https://docs.confluent.io/current/": "https://docs.confluent.io/platform/current/",
    "https://kafka.apache.org/documentation.html": "https://kafka.apache.org/documentation/",
    "https://github.com/edenhill/librdkafka": "https://github.com/confluentinc/librdkafka",
}


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def external_links(text: str) -> list[tuple[int, str]]:
    """``(line number, URL)`` of every external link outside code, trailing punctuation removed."""
    found = []
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or line.startswith("    "):
            continue
        for match in _URL.finditer(_CODE_SPAN.sub("", line)):
            found.append((number, match.group(0).rstrip(".,;:!?*_")))
    return found


def all_links() -> list[tuple[str, int, str]]:
    """``(file relative to the repository, line, URL)`` over README.md and docs/."""
    return [
        (str(path.relative_to(ROOT)), number, url)
        for path in doc_files()
        for number, url in external_links(path.read_text(encoding="utf-8"))
    ]


def page_key(url: str) -> str:
    """The page a URL names, spelled one way: scheme and host case, ``www.``, a trailing slash,
    GitHub's ``blob``/``tree`` and the fragment do not make another page."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.lower().removeprefix("www.")
    path = parts.path
    if host == "github.com":
        path = re.sub(r"^(/[^/]+/[^/]+)/(?:blob|tree)/", r"\1/-/", path)
    return f"{host}{path.rstrip('/')}" + (f"?{parts.query}" if parts.query else "")


def test_the_listing_finds_links_and_leaves_code_out():
    text = (
        "See [Kafka](https://kafka.apache.org/documentation/#semantics), <https://github.com/dpkp/kafka-python>\n"
        "or https://airflow.apache.org/docs/. Run `curl https://in.a.code.span/x`:\n"
        "```\n"
        "pip install --constraint https://in.a.fence/c.txt\n"
        "```\n"
        "    https://indented.code/block\n"
    )
    assert external_links(text) == [
        (1, "https://kafka.apache.org/documentation/#semantics"),
        (1, "https://github.com/dpkp/kafka-python"),
        (2, "https://airflow.apache.org/docs/"),
    ]
    assert page_key("https://GitHub.com/a/b/blob/main/docs/x/") == page_key("https://github.com/a/b/tree/main/docs/x")


def test_every_external_link_is_well_formed_https():
    links = all_links()
    assert links, "no external link found: the listing is broken"
    bad = []
    for where, line, url in links:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        if parts.scheme != "https":
            bad.append(f"{where}:{line}: {url} is not https")
        elif "." not in host or parts.username or parts.password or not re.fullmatch(r"[a-z0-9.-]+", host):
            bad.append(f"{where}:{line}: {url} has no public host name (or carries credentials)")
    assert not bad, "\n".join(bad)


def test_links_into_this_repository_name_files_that_exist():
    """A page moved or deleted in this repository breaks every absolute link to it (the README's
    links are absolute so that they work on the package index)."""
    prefix = PROJECT_URL + "/"
    checked, bad = 0, []
    for where, line, url in all_links():
        if not url.startswith(prefix):
            continue
        rest = urllib.parse.urlsplit(url).path.removeprefix(urllib.parse.urlsplit(PROJECT_URL).path + "/")
        kind, _, path = rest.partition("/main/")
        if kind not in ("blob", "tree") or not path:
            continue  # the repository's own pages (issues, commits): nothing in the checkout to compare
        checked += 1
        target = ROOT / urllib.parse.unquote(path)
        if kind == "blob" and not target.is_file():
            hint = " (a folder: link tree/main/...)" if target.is_dir() else ""
            bad.append(f"{where}:{line}: {url} names no file of this repository{hint}")
        elif kind == "tree" and not target.is_dir():
            bad.append(f"{where}:{line}: {url} names no folder of this repository")
    assert checked, "no link into this repository found: the listing is broken"
    assert not bad, "\n".join(bad)


def test_no_page_is_linked_under_two_spellings():
    spellings: dict[str, set[str]] = defaultdict(set)
    places: dict[str, list[str]] = defaultdict(list)
    for where, line, url in all_links():
        page = url.split("#", 1)[0]
        spellings[page_key(url)].add(page)
        places[page].append(f"{where}:{line}")
    doubled = {key: sorted(found) for key, found in spellings.items() if len(found) > 1}
    assert not doubled, "\n".join(
        f"{' and '.join(found)} are one page: pick one spelling "
        f"({', '.join(place for url in found for place in places[url])})"
        for found in doubled.values()
    )


def test_no_link_uses_a_location_known_to_have_moved():
    bad = [
        f"{where}:{line}: {url} moved to {new}{url[len(old):]}"
        for where, line, url in all_links()
        for old, new in MOVED.items()
        if url.startswith(old)
    ]
    assert not bad, "\n".join(bad)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects and remembers the permanent ones (a moved page)."""

    def __init__(self) -> None:
        self.permanent: list[tuple[str, str]] = []

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if code in (301, 308):
            self.permanent.append((req.full_url, newurl))
        return super().redirect_request(req, fp, code, msg, headers, newurl)


@pytest.mark.skipif(
    os.environ.get(CHECK_LINKS_ENV) != "1",
    reason=f"fetching external links needs outbound HTTPS, which this machine lacks: set {CHECK_LINKS_ENV}=1",
)
def test_every_external_link_answers():  # pragma: no cover - needs the network
    pages = sorted({url.split("#", 1)[0] for _, _, url in all_links()})
    redirects = _Redirects()
    opener = urllib.request.build_opener(redirects)
    failed = []
    for page in pages:
        # https only: test_every_external_link_is_well_formed_https refuses any other scheme
        request = urllib.request.Request(page, headers={"User-Agent": "kafka-eos-linkcheck"})  # noqa: S310
        try:
            with opener.open(request, timeout=15) as answer:
                answer.read(1)
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            failed.append(f"{page}: {exc}")
    failed += [f"{old} moved permanently to {new}" for old, new in redirects.permanent]
    assert not failed, "\n".join(failed)
