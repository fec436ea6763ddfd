"""What an index sends, fuzzed: project pages (PEP 691 JSON and PEP 503 HTML), METADATA and the wheels
it is read from give files / metadata or the project's IndexAccessError, never another exception.

Each reader gets 2,000 cases (a fixed seed, so CI sees the same ones): documents generated field by
field with wrong types, odd URLs (file://, a broken IPv6 literal, control characters, entities) and
odd hashes, and real pages, METADATA and wheels with bytes overwritten or cut. What a reader returns
is checked too: only http(s) links from a remote page, URLs without white space or control
characters, a sha256 of 64 hex digits or none.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta

from budget import budgeted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from index_server import IndexServer, make_wheel
from packaging.version import Version

from cudaresolve.index.http import IndexAccessError
from cudaresolve.index.limits import Limits
from cudaresolve.index.metadata import _from_archive, parse_metadata
from cudaresolve.index.pages import JSON_TYPE, ProjectFile, parse_page

CASES = settings(
    max_examples=2000,
    deadline=timedelta(seconds=2),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
BASE = "https://index.example/simple/demo/"
SMALL = Limits(page_items=5_000, page_tag_bytes=4096, page_files=200)  # so the fuzzer reaches the limits too

NAMES = st.sampled_from([
    "demo-1.0-py3-none-any.whl", "demo-1.0.tar.gz", "demo-2.0rc1-cp311-cp311-manylinux_2_17_x86_64.whl",
    "demo-1.0.zip", "Demo-1.0-py3-none-any.whl", "other-1.0-py3-none-any.whl", "demo-x.y-py3-none-any.whl",
    "demo-1.0-1-py3-none-any.whl", "demo.whl", "", "demo-1.0-py3-none-any.whl\n", "demo-1.0-py3-none-any.whl.metadata",
])
URLS = st.one_of(
    st.sampled_from([
        "../../files/demo-1.0-py3-none-any.whl", "https://files.example/demo-1.0-py3-none-any.whl",
        "file:///dev/zero", "file:///dev/zero?x=/demo-1.0-py3-none-any.whl", "http://[::1/demo-1.0-py3-none-any.whl",
        "http://[::1]:99999/demo-1.0.tar.gz", "javascript:alert(1)//demo-1.0-py3-none-any.whl", "//other.example/demo-1.0.zip",
        "demo-1.0-py3-none-any.whl#sha256=" + "a" * 64, "demo-1.0-py3-none-any.whl#sha256=xyz&md5=00",
        "demo-1.0-py3-none-any.whl#sha256=" + "a" * 64 + "\n--index-url=http://evil/", "demo 1.0-py3-none-any.whl",
        "demo-1.0-py3-none-any.whl\x00", "ftp://x/demo-1.0-py3-none-any.whl", "",
    ]),
    st.text(max_size=60),
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=40))
HASHES = st.one_of(
    st.dictionaries(st.sampled_from(["sha256", "SHA256", "md5", "blake2b", "", "sha 256"]),
                    st.one_of(st.sampled_from(["a" * 64, "A" * 64, "0" * 63, "g" * 64, "a" * 64 + "\n"]), SCALARS), max_size=3),
    SCALARS,
)
JSON_ENTRY = st.fixed_dictionaries(
    {"filename": st.one_of(NAMES, SCALARS), "url": st.one_of(URLS, SCALARS)},
    optional={
        "hashes": HASHES,
        "requires-python": st.one_of(st.sampled_from([">=3.8", ">=3.8,<4", "!!", ">=3.8\n"]), SCALARS),
        "yanked": SCALARS,
        "core-metadata": st.one_of(HASHES, SCALARS),
        "dist-info-metadata": st.one_of(HASHES, SCALARS),
        "size": SCALARS,
    },
)
JSON_DOCUMENT = st.one_of(
    st.fixed_dictionaries({"files": st.lists(st.one_of(JSON_ENTRY, SCALARS), max_size=6)}, optional={"meta": SCALARS, "name": SCALARS}),
    st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12),
)
ATTRIBUTES = st.lists(
    st.tuples(
        st.sampled_from(["href", "HREF", "data-requires-python", "data-yanked", "data-core-metadata", "data-dist-info-metadata", "x"]),
        st.one_of(URLS, st.sampled_from(["&gt;=3.8", "&#10;", "&#0;", "true", "sha256=" + "b" * 64, "sha256=zz", "sha256"]), st.text(max_size=20)),
    ),
    max_size=4,
)


def _anchor(attributes: list, quote: str) -> str:
    return "<a " + " ".join(f"{name}={quote}{value}{quote}" for name, value in attributes) + ">demo</a>"


HTML_DOCUMENT = st.builds(
    lambda base, anchors, tail: (f'<html><head>{base}</head><body>' + "".join(anchors) + tail),
    st.sampled_from(["", '<base href="https://mirror.example/x/">', '<base href="file:///">', '<base href="http://[::1">']),
    st.lists(st.builds(_anchor, ATTRIBUTES, st.sampled_from(['"', "'", ""])), max_size=6),
    st.sampled_from(["</body></html>", "", "<!-- <a href='demo-1.0.zip'> -->", "<a href=", "<" * 5, "<script><a href=x></script>"]),
)


def _mutated(document: bytes) -> st.SearchStrategy[bytes]:
    """`document` with a few of its bytes overwritten, some inserted, or cut short."""

    def apply(edits: list, cut: int) -> bytes:
        data = bytearray(document)
        for position, value, insert in edits:
            position %= len(data) + 1
            if insert:
                data[position:position] = value
            else:
                data[position : position + len(value)] = value
        return bytes(data[: cut % (len(data) + 1) if cut else len(data)])

    edit = st.tuples(st.integers(0, 1 << 20), st.binary(min_size=1, max_size=8), st.booleans())
    return st.builds(apply, st.lists(edit, min_size=1, max_size=4), st.integers(0, 1 << 20))


def _real_page(as_json: bool) -> bytes:
    index = IndexServer()
    index.add(*make_wheel("demo", "1.0"), requires_python=">=3.8", yanked="broken")
    index.add(*make_wheel("demo", "2.0"), metadata=False)
    return index.page("demo", as_json)[0]


def _check(files: tuple[ProjectFile, ...], base: str) -> None:
    for file in files:
        assert not any(c.isspace() or not c.isprintable() for c in file.url)
        assert file.sha256 is None or (len(file.sha256) == 64 and all(c in "0123456789abcdef" for c in file.sha256))
        if base.startswith("https:"):
            assert file.url.startswith(("http://", "https://"))


def _parses_or_refuses(body: bytes, content_type: str) -> None:
    try:
        files = parse_page(body, content_type, BASE, "demo", source=BASE, limits=SMALL)
    except IndexAccessError:
        return
    _check(files, BASE)


@CASES
@given(st.one_of(JSON_DOCUMENT.map(lambda d: json.dumps(d).encode()), _mutated(_real_page(True)), st.binary(max_size=200)))
@budgeted
def test_json_pages(body):
    _parses_or_refuses(body, JSON_TYPE)


@CASES
@given(st.one_of(HTML_DOCUMENT.map(str.encode), _mutated(_real_page(False)), st.binary(max_size=200)))
@budgeted
def test_html_pages(body):
    _parses_or_refuses(body, "text/html")


DEMO = ProjectFile("demo-1.0-py3-none-any.whl", "https://x/demo-1.0-py3-none-any.whl", "demo", Version("1.0"), (), None, None, None, None, "x")
HEADER_LINES = st.lists(
    st.builds(
        "{}: {}".format,
        st.sampled_from(["Metadata-Version", "Name", "Version", "Requires-Dist", "Requires-Python", "Provides-Extra", "Dynamic", "X"]),
        st.one_of(st.sampled_from(["2.1", "demo", "1.0", "numpy>=1", "extra == 'x'", ">=3.8", "1.0\n Requires-Dist: evil"]), st.text(max_size=30)),
    ),
    max_size=8,
)
REAL_METADATA = b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: numpy>=1.20\nProvides-Extra: gpu\n\nA description.\n"


@CASES
@given(st.one_of(
    HEADER_LINES.map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")),
    _mutated(REAL_METADATA),
    st.binary(max_size=300),
))
@budgeted
def test_metadata(raw):
    try:
        metadata = parse_metadata(raw, DEMO, "fuzz")
    except IndexAccessError:
        return
    assert metadata.name.lower() == "demo" and Version(metadata.version) == Version("1.0")


WHEEL = make_wheel("demo", "1.0", requires=["numpy"])[1]


@CASES
@given(_mutated(WHEEL))
@budgeted
def test_wheels(data):
    try:
        raw = _from_archive(io.BytesIO(data), DEMO, Limits())
    except IndexAccessError:
        return
    assert isinstance(raw, bytes)
