"""The grammar of every lock field: one rule per kind of value, used by the reader on every value it
takes from a file and by the writers on every value they write, so a lock file is hostile input
until each value has passed its rule, and no value can become a line or an option for pip.

A rule takes the raw value and returns its normalised form (a canonical name, a PEP 440 version as
packaging prints it, a lowercase digest) or raises `Invalid` saying why; the caller adds the file,
the package and the key; lockfile/check.py applies them to a whole Lock before it is written. The
limits are stated here and in docs/lock-files.md.

May import: packaging, errors.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any, TypeVar

from packaging.markers import InvalidMarker, Marker
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from cudaresolve.errors import UsageError

T = TypeVar("T")

MAX_FILE_BYTES = 16 << 20  # a lock of hundreds of packages and a fleet of hosts is well under 1 MiB
MAX_NAME = 200  # a distribution name or a wheel's file name
MAX_VERSION = 200
MAX_URL = 4096
MAX_PATH = 4096
MAX_MARKER = 1000  # a marker or requires-python
MAX_LABEL = 1000  # one-line text: created-by, provided-by, a host's label
MAX_TEXT = 20000  # a reason or a decision's words
MAX_SIZE = 1 << 40  # a wheel's size in bytes (the largest CUDA wheels are a few GB)
MAX_FACTS = 10000  # values in one host's facts (a host with 8 GPUs of 7 MIG devices each has ~300)

URL_SCHEMES = ("https", "http", "file")

_PEP508_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_HEX = re.compile(r"[0-9a-fA-F]{1,256}")
_LOCK_VERSION = re.compile(r"1(?:\.[0-9]{1,9}){0,2}")
# RFC 3986's characters less the quote pip's option parser (shlex) would remove; no space, no
# control character, no "{" for pip's ${VARIABLE} expansion, nothing outside ASCII.
_URL_CHARS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=%]+")
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


class LockFileError(UsageError):
    """A lock file that breaks a rule, or a lock that cannot be written safely: exit 3, one line
    naming the file (or the lock being written), the package and the key."""


class Invalid(ValueError):
    """One value that breaks its field's rule; the message says how, the caller says where."""


def shown(value: Any) -> str:
    """A value for an error line: its repr (control characters escaped), cut to a readable length."""
    text = repr(value)
    if len(text) > 60:
        size = f" ({len(value)} characters)" if isinstance(value, str) else ""
        text = text[:50] + "…" + size
    return text


def _string(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        raise Invalid(f"expected a string, got {shown(value)}")
    if len(value) > limit:
        raise Invalid(f"longer than {limit} characters ({len(value)})")
    return value


# Unicode's control characters (category Cc) and its line and paragraph separators (Zl, Zp): what
# a terminal acts on, and every character str.splitlines() (pip's line reader among others) ends a
# line at (\n, \r, \x0b, \x0c, \x1c-\x1e, \x85, U+2028, U+2029).
BREAKING = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _no_controls(value: str, allowed: str = "") -> str:
    for found in BREAKING.finditer(value):
        if found.group() not in allowed:
            raise Invalid(f"control character U+{ord(found.group()):04X} in {shown(value)}")
    return value


def _no_option(value: str) -> str:
    """Refuse what would read as a pip option after a space: `x --index-url http://evil`."""
    if any(word.startswith("-") for word in value.split()[1:]):
        raise Invalid(f"a word starting with '-' after a space, as a pip option would: {shown(value)}")
    return value


def name(value: Any) -> NormalizedName:
    """A PEP 508 distribution name, normalised (PEP 503)."""
    text = _no_controls(_string(value, MAX_NAME))
    if not _PEP508_NAME.fullmatch(text):
        raise Invalid(f"not a PEP 508 name: {shown(text)}")
    return canonicalize_name(text)


def version(value: Any) -> str:
    """A PEP 440 version as packaging prints it; no surrounding whitespace (packaging would strip it)."""
    text = _no_controls(_string(value, MAX_VERSION))
    if text != text.strip():
        raise Invalid(f"whitespace around the version {shown(text)}")
    try:
        parsed = Version(text)
    except InvalidVersion:
        parsed = None
    if parsed is None or not text.isascii():  # packaging's letters match Unicode ones case-insensitively
        raise Invalid(f"not a PEP 440 version: {shown(text)}")
    return str(parsed)


def sha256(value: Any) -> str:
    """A SHA-256 digest: exactly 64 hexadecimal digits, returned in lowercase as pip compares them."""
    if not isinstance(value, str):
        raise Invalid(f"expected a string, got {shown(value)}")
    text = value
    if not _SHA256.fullmatch(text):
        raise Invalid(f"not 64 hexadecimal digits: {shown(text)}")
    return text.lower()


def other_hash(value: Any) -> str:
    """Another algorithm's digest (sha512, ...): unused, but still hexadecimal and bounded."""
    text = _string(value, 256)
    if not _HEX.fullmatch(text):
        raise Invalid(f"not hexadecimal digits: {shown(text)}")
    return text.lower()


def url(value: Any) -> str:
    """An http(s) or file URL in RFC 3986's characters (percent-encoded beyond them), with a host
    for http(s)."""
    text = _no_controls(_string(value, MAX_URL))
    if not text:
        raise Invalid("empty")
    if not _URL_CHARS.fullmatch(text):
        bad = next(c for c in text if not _URL_CHARS.fullmatch(c))
        raise Invalid(f"{bad!r} is not a URL character (percent-encode it): {shown(text)}")
    if _PERCENT.search(text):
        raise Invalid(f"'%' not followed by two hexadecimal digits: {shown(text)}")
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as exc:
        raise Invalid(f"not a URL ({exc}): {shown(text)}") from None
    if parts.scheme.lower() not in URL_SCHEMES:
        raise Invalid(f"not an {', '.join(URL_SCHEMES)} URL: {shown(text)}")
    if parts.scheme.lower() != "file" and not parts.hostname:
        raise Invalid(f"no host in {shown(text)}")
    return text


def path(value: Any) -> str:
    """A local path (PEP 751: relative to the lock file): no control character, nothing a pip
    option could be read from."""
    text = _no_option(_no_controls(_string(value, MAX_PATH)))
    if not text:
        raise Invalid("empty")
    return text


def marker(value: Any) -> str:
    """A PEP 508 environment marker as packaging prints it. It is written after a pin in pip's
    files, so it must not carry what pip's line reader acts on: '#' (a comment), '\\' (a line
    continuation), '$' (${VARIABLE} expansion) or a word starting with '-' (an option)."""
    text = _no_option(_no_controls(_string(value, MAX_MARKER)))
    if not text.isascii():
        raise Invalid(f"a character outside ASCII in the marker {shown(text)}")
    for char in "#\\$":
        if char in text:
            raise Invalid(f"{char!r} in the marker {shown(text)}")
    try:
        return str(Marker(text))
    except InvalidMarker as exc:
        first = str(exc).splitlines()[0]  # packaging adds lines pointing at the spot
        raise Invalid(f"not a valid marker: {shown(text)} ({first})") from None


def requires_python(value: Any) -> str:
    """A PEP 440 version specifier set (only ever written to TOML: kept as given)."""
    text = _no_controls(_string(value, MAX_MARKER))
    try:
        SpecifierSet(text)
    except InvalidSpecifier as exc:
        raise Invalid(f"not a valid version specifier: {shown(text)} ({str(exc).splitlines()[0]})") from None
    return text


def lock_version(value: Any) -> str:
    text = _string(value, 32)
    if not _LOCK_VERSION.fullmatch(text):
        raise Invalid(f"{shown(text)} is not supported (this cudaresolve reads 1.x)")
    return text


def size(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise Invalid(f"expected an integer, got {shown(value)}")
    if not 0 <= value <= MAX_SIZE:
        raise Invalid(f"not a size from 0 to {MAX_SIZE} bytes: {value}")
    return value


def wheel_filename(value: Any, package: str, package_version: str) -> str:
    """A wheel's file name whose name and version are the package's (PEP 751 requires it)."""
    text = _no_controls(_string(value, MAX_NAME))
    try:
        found, found_version, _, _ = parse_wheel_filename(text)
    except (InvalidWheelFilename, InvalidVersion):
        raise Invalid(f"{shown(text)} is not a wheel file name") from None
    if found != canonicalize_name(package):
        raise Invalid(f"{shown(text)} is a wheel of {found}, not of {package}")
    if package_version and found_version != Version(package_version):
        raise Invalid(f"{shown(text)} is version {found_version}, not {package_version}")
    return text


def sdist_filename(value: Any, package: str, package_version: str) -> str:
    """An sdist's file name (.tar.gz or .zip) whose name and version are the package's."""
    text = _no_controls(_string(value, MAX_NAME))
    try:
        found, found_version = parse_sdist_filename(text)
    except (InvalidSdistFilename, InvalidVersion):
        raise Invalid(f"{shown(text)} is not an sdist file name") from None
    if found != canonicalize_name(package):
        raise Invalid(f"{shown(text)} is an sdist of {found}, not of {package}")
    if package_version and found_version != Version(package_version):
        raise Invalid(f"{shown(text)} is version {found_version}, not {package_version}")
    return text


def extra(value: Any) -> str:
    """An extra's name (PEP 685), normalised."""
    text = _no_controls(_string(value, MAX_NAME))
    if not _PEP508_NAME.fullmatch(text):
        raise Invalid(f"not an extra's name: {shown(text)}")
    return canonicalize_name(text)


def label(value: Any) -> str:
    """One line of text (created-by, provided-by, a host's label): no control character at all."""
    return _no_controls(_string(value, MAX_LABEL))


def provider(value: Any) -> str:
    """A kept package's provided-by: a label, not empty (the writer leaves an empty one out, so it
    would not read back the same)."""
    if value == "":
        raise Invalid("empty")
    return label(value)


def text(value: Any) -> str:
    """Words for people (a reason, a decision): lines and tabs, but no other control character,
    so nothing a terminal would act on reaches it through `why` or the plan."""
    return _no_controls(_string(value, MAX_TEXT), allowed="\t\n")


def facts(value: Any) -> dict[str, Any]:
    """A host's facts as a lock holds them: a table whose strings (keys too) are words for people
    (`text`), at most MAX_FACTS values in all; their meaning is host/facts.py's to judge."""
    if not isinstance(value, dict):
        raise Invalid(f"expected a table, got {shown(value)}")
    pending: list[Any] = [value]
    count = 0
    while pending:
        item = pending.pop()
        count += 1
        if count > MAX_FACTS:
            raise Invalid(f"more than {MAX_FACTS} values")
        if isinstance(item, str):
            text(item)
        elif isinstance(item, dict):
            pending += list(item.keys()) + list(item.values())
        elif isinstance(item, list):
            pending += item
    return value
