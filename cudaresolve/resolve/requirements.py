"""What `cudaresolve lock` is asked to lock: pip requirements files, pyproject.toml and command-line
requirements, read into one `RequirementSet` for the resolver.

Requirements files follow pip's documented format (comments, continuations, `${VAR}`, -r/-c,
index options, --hash); what cudaresolve cannot lock yet (direct references, editables, the pip
options it does not model) is refused with a one-line UsageError naming the file and line, never
dropped silently. Every requirement is checked with packaging's PEP 508 parser where it is read, so
a bad one names where it came from, and it keeps that origin (resolve/reasons.py's Asked and
Constrained) on its way through the resolver. `--hash` options are checked and not kept: the lock
pins the sha256 its index publishes for each chosen wheel.

May import: packaging, bounded (bounded reads), records.shown, errors, index/config (IndexSettings),
resolve/reasons.py.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudaresolve import bounded, records
from cudaresolve.errors import UsageError
from cudaresolve.index.config import IndexSettings
from cudaresolve.resolve.reasons import Asked, Constrained, Need


@dataclass(frozen=True)
class RequirementSet:
    """Everything the resolver is asked for; each requirement names the file and line it came from."""

    requirements: tuple[Need, ...]  # each parsed once by packaging, with where it was written
    constraints: tuple[Need, ...]
    index_options: IndexSettings = field(default_factory=IndexSettings)  # the index lines of requirements files


# -- one requirement -----------------------------------------------------------------------------


def parse_requirement(text: str, origin: str) -> Requirement:
    """`text` as a PEP 508 requirement; `origin` ("reqs.txt:3", "pyproject.toml: project.dependencies[0]")
    names it in the error. Direct references are refused: the resolver locks index files only."""
    try:
        requirement: Requirement = bounded.parse_requirement(text)
    except InvalidRequirement as exc:
        if _looks_like_location(text):
            raise UsageError(f"{origin}: {text}: direct references (URLs and paths) are not supported yet") from None
        reason = str(exc).splitlines()[0]
        reason = reason if len(reason) <= 200 else reason[:197] + "..."
        raise UsageError(f"{origin}: not a valid requirement: {records.shown(text)} ({reason})") from None
    if requirement.url:
        raise UsageError(f"{origin}: {requirement.name} @ {requirement.url}: direct references are not supported yet")
    return requirement


def _looks_like_location(text: str) -> bool:
    """pip also takes a bare path or URL as a requirement (a local wheel, an archive, a project directory)."""
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text)) or "/" in text or "\\" in text or text.startswith(".")


COMMAND_LINE = "command line"


def from_command_line(texts: Sequence[str], where: str = COMMAND_LINE) -> RequirementSet:
    """Requirements given as arguments (`cudaresolve lock torch cupy-cuda12x`)."""
    parsed = [Need(parse_requirement(text, f"{where}: {text!r}"), Asked(where)) for text in texts]
    return RequirementSet(requirements=unique(parsed), constraints=())


def unique(needs: Iterable[Need]) -> tuple[Need, ...]:
    """Each requirement once, with the origin it was first met with."""
    found: dict[str, Need] = {}
    for need in needs:
        found.setdefault(str(need.requirement), need)
    return tuple(found.values())


def merge(sets: Iterable[RequirementSet]) -> RequirementSet:
    """Several inputs as one: requirements and constraints in order without repeats, the last
    --index-url wins (as in pip, where a later option overrides an earlier one), the other index
    options add up."""
    requirements: list[Need] = []
    constraints: list[Need] = []
    index = IndexSettings()
    for one in sets:
        requirements += one.requirements
        constraints += one.constraints
        index = _merge_index(index, one.index_options)
    return RequirementSet(
        requirements=unique(requirements),
        constraints=unique(constraints),
        index_options=index,
    )


def _merge_index(a: IndexSettings, b: IndexSettings) -> IndexSettings:
    return IndexSettings(
        index_url=b.index_url or a.index_url,
        extra_index_urls=_listed((a.extra_index_urls or ()) + (b.extra_index_urls or ())),
        find_links=_listed((a.find_links or ()) + (b.find_links or ())),
        no_index=True if a.no_index or b.no_index else None,
        trusted_hosts=_listed((a.trusted_hosts or ()) + (b.trusted_hosts or ())),
    )


def _listed(values: Iterable[str]) -> Optional[tuple[str, ...]]:
    """Each value once, in order; None for none (not set)."""
    return tuple(dict.fromkeys(values)) or None


# -- pip requirements files ----------------------------------------------------------------------

# Options cudaresolve reads, by every spelling pip accepts, and whether each takes a value.
_OPTIONS = {
    "-r": "requirement", "--requirement": "requirement",
    "-c": "constraint", "--constraint": "constraint",
    "-i": "index-url", "--index-url": "index-url",
    "--extra-index-url": "extra-index-url",
    "-f": "find-links", "--find-links": "find-links",
    "--no-index": "no-index",
    "--trusted-host": "trusted-host",
    "-e": "editable", "--editable": "editable",
    "--hash": "hash",
}
_FLAGS = {"no-index"}
_PER_REQUIREMENT = {"hash"}
# pip options a requirements file may hold that cudaresolve does not model: refused, not ignored,
# since each changes what pip would install.
_UNSUPPORTED = {
    "--pre", "--prefer-binary", "--only-binary", "--no-binary", "--require-hashes", "--use-feature",
    "--config-settings", "--global-option", "--install-option",
}
_ENV_VAR = re.compile(r"\$\{([A-Z0-9_]+)\}")  # pip expands the POSIX ${NAME} form only
_HASH = re.compile("#")
MAX_INCLUDE_DEPTH = 100  # -r/-c files within files: pip recurses too, and Python's stack ends near 1,000
MAX_FILES_READ = 1000  # files read for one top-level file, an include read again counted again
# Extras naming the project itself, and dependency groups including groups: each level nests the
# markers once more, and packaging refuses markers nested 200 deep.
MAX_PROJECT_NESTING = 50
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


@dataclass
class _Collected:
    """What the files read so far add up to (mutable while reading; frozen into a RequirementSet)."""

    requirements: list[Need] = field(default_factory=list)
    constraints: list[Need] = field(default_factory=list)
    index_url: Optional[str] = None
    extra_index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    no_index: bool = False
    trusted_hosts: list[str] = field(default_factory=list)
    reads: int = 0  # files read so far, bounded by MAX_FILES_READ


def read_requirements_file(path: str, environ: Optional[dict[str, str]] = None, *, constraint: bool = False) -> RequirementSet:
    """A pip requirements file with everything it includes (read as a constraints file, pip's -c,
    with `constraint`); `environ` (default os.environ) for `${VAR}`."""
    collected = _Collected()
    _read_file(path, constraint=constraint, stack=(), collected=collected, environ=os.environ if environ is None else environ)
    return RequirementSet(
        requirements=unique(collected.requirements),
        constraints=unique(collected.constraints),
        index_options=IndexSettings(
            index_url=collected.index_url,
            extra_index_urls=_listed(collected.extra_index_urls),
            find_links=_listed(collected.find_links),
            no_index=True if collected.no_index else None,
            trusted_hosts=_listed(collected.trusted_hosts),
        ),
    )


def _decode(data: bytes, path: str) -> str:
    """UTF-8 unless a BOM or a PEP 263 coding comment in the first two lines says otherwise, as pip reads it."""
    encoding = "utf-8"
    if data.startswith(codecs.BOM_UTF8):
        encoding, data = "utf-8", data[len(codecs.BOM_UTF8):]
    else:
        for line in data.split(b"\n")[:2]:
            match = _CODING.match(line)
            if match:
                encoding = match.group(1).decode("ascii")
                break
    try:
        text = data.decode(encoding)
    except LookupError:
        raise UsageError(f"{path}: unknown encoding {encoding!r}") from None
    except UnicodeError as exc:  # UnicodeDecodeError, or a codec's own failure ("undefined")
        raise UsageError(f"{path}: not {encoding} ({exc})") from None
    if "\0" in text:
        number = text.count("\n", 0, text.index("\0")) + 1
        raise UsageError(f"{path}:{number}: a NUL character: not a text file")
    return text


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) after joining `\\` continuations and stripping comments, in that
    order as pip documents; a comment line ending in a backslash continues nothing."""
    lines: list[tuple[int, str]] = []
    pending: Optional[tuple[int, str]] = None
    for number, line in enumerate(text.splitlines(), start=1):
        is_comment = line.lstrip().startswith("#")
        if pending is not None:
            start, joined = pending
            line, number = joined + line, start
            pending = None
        if line.endswith("\\") and not is_comment:
            pending = (number, line[:-1])
            continue
        lines.append((number, line))
    if pending is not None:
        lines.append(pending)
    stripped = [(number, _uncommented(line).strip()) for number, line in lines]
    return [(number, line) for number, line in stripped if line]


def _uncommented(line: str) -> str:
    """`line` without its comment: from a `#` at the start or after whitespace, pip's `(^|\\s+)#.*$`
    (that expression takes quadratic time on a long run of spaces; this finds the same `#` in one pass)."""
    for found in _HASH.finditer(line):
        if found.start() == 0 or line[found.start() - 1].isspace():
            return line[: found.start()]
    return line


def _expand(line: str, environ: Mapping[str, str]) -> str:
    """`${NAME}` replaced by the variable's value; an unset or empty variable is left as written, as pip does."""
    return _ENV_VAR.sub(lambda m: environ.get(m.group(1)) or m.group(0), line)


def _split(line: str, where: str) -> tuple[str, list[str]]:
    """(requirement text, option tokens): the requirement runs up to the first word starting with "-"."""
    words = line.split()
    cut = next((i for i, word in enumerate(words) if word.startswith("-")), len(words))
    try:
        options = shlex.split(" ".join(words[cut:]))
    except ValueError as exc:
        raise UsageError(f"{where}: cannot split the options ({exc})") from None
    return " ".join(words[:cut]), options


def _options(tokens: list[str], where: str) -> list[tuple[str, Optional[str], str]]:
    """(option name, value, as written) for each option, in pip's spellings: `--opt value`,
    `--opt=value`, `-o value` and `-ovalue`."""
    found: list[tuple[str, Optional[str], str]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--"):
            spelled, equals, value = token.partition("=")
            has_value = bool(equals)
        else:
            spelled, value = token[:2], token[2:]
            has_value = bool(value)
        if spelled in _UNSUPPORTED:
            raise UsageError(f"{where}: pip option {spelled} is not supported by cudaresolve lock")
        name = _OPTIONS.get(spelled)
        if name is None:
            raise UsageError(f"{where}: unknown option {spelled}")
        if name in _FLAGS:
            if has_value:
                raise UsageError(f"{where}: {spelled} takes no value")
            found.append((name, None, spelled))
        elif has_value:
            found.append((name, value, spelled))
        elif i + 1 < len(tokens):
            i += 1
            found.append((name, tokens[i], spelled))
        else:
            raise UsageError(f"{where}: {spelled} needs a value")
        i += 1
    return found


def _read_file(path: str, *, constraint: bool, stack: tuple[str, ...], collected: _Collected, environ: Mapping[str, str]) -> None:
    try:
        data = bounded.read_bounded(path, regular=True)  # a FIFO (`-r fifo`, here or in a file) would wait for ever
        real = _realpath(path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    collected.reads += 1
    if collected.reads > MAX_FILES_READ:
        raise UsageError(f"{path}: more than {MAX_FILES_READ} requirements files read through -r/-c (an include read again counts again)")
    for number, line in _logical_lines(_decode(data, path)):
        where = f"{path}:{number}"
        text, tokens = _split(_expand(line, environ), where)
        options = _options(tokens, where)
        if text:
            _requirement(text, options, where, constraint, collected)
            continue
        for name, value, spelled in options:
            if name in _PER_REQUIREMENT:
                raise UsageError(f"{where}: {spelled} belongs on a requirement's line")
            if name == "no-index":
                collected.no_index = True
                continue
            assert value is not None  # _options gives every option but the flag --no-index a value
            if name in ("requirement", "constraint"):
                if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value):
                    raise UsageError(f"{where}: {spelled} {value}: remote requirements files are not supported")
                included = value if os.path.isabs(value) else os.path.join(os.path.dirname(path), value)
                chain = stack + (real,)
                try:
                    included_real = _realpath(included)
                except OSError as exc:
                    raise UsageError(f"{where}: cannot read {included}: {exc.strerror}") from None
                if included_real in chain:
                    loop = chain[chain.index(included_real):] + (included_real,)
                    raise UsageError(f"{where}: {spelled} {value}: files include each other ({' -> '.join(loop)})")
                if len(chain) >= MAX_INCLUDE_DEPTH:
                    raise UsageError(f"{where}: {spelled} {value}: files include files more than {MAX_INCLUDE_DEPTH} deep")
                _read_file(
                    included,
                    constraint=constraint or name == "constraint",
                    stack=stack + (real,),
                    collected=collected,
                    environ=environ,
                )
            elif name == "editable":
                raise UsageError(f"{where}: {spelled} {value}: editable installs are not locked")
            elif name == "index-url":
                collected.index_url = value
            elif name == "extra-index-url":
                collected.extra_index_urls.append(value)
            elif name == "find-links":
                # pip takes a relative find-links path relative to the file when it exists there.
                beside = os.path.join(os.path.dirname(path), value)
                collected.find_links.append(beside if "://" not in value and os.path.exists(beside) else value)
            elif name == "trusted-host":
                collected.trusted_hosts.append(value)


def _realpath(path: str) -> str:
    try:
        return os.path.realpath(path)
    except ValueError:  # a character the file system encoding cannot hold
        raise OSError(errno.EINVAL, "not a valid path", path) from None


def _requirement(text: str, options: list[tuple[str, Optional[str], str]], where: str, constraint: bool, collected: _Collected) -> None:
    requirement = parse_requirement(text, where)
    for name, value, spelled in options:
        if name not in _PER_REQUIREMENT:
            raise UsageError(f"{where}: {spelled} must be on its own line, not after a requirement")
        assert value is not None  # --hash takes a value
        algorithm, _, digest = value.partition(":")
        if algorithm != "sha256":
            raise UsageError(f"{where}: --hash={value}: only sha256 hashes are supported")
        if not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
            raise UsageError(f"{where}: --hash={value}: not a sha256 hex digest")
    if constraint:
        if requirement.extras:
            raise UsageError(f"{where}: {text}: a constraint cannot name extras (pip refuses them too)")
        collected.constraints.append(Need(requirement, Constrained(where)))
    else:
        collected.requirements.append(Need(requirement, Asked(where)))


# -- pyproject.toml ------------------------------------------------------------------------------


def read_project(directory: str, extras: Sequence[str] = (), groups: Sequence[str] = ()) -> RequirementSet:
    """The requirements of the project in `directory`: `[project].dependencies`, the optional
    dependencies of `extras` and the PEP 735 dependency groups `groups`.

    A requirement naming the project itself (`all = ["me[gpu,test]"]`) stands for the project's
    dependencies with those extras: the project is being locked, it is not on an index.
    """
    path = os.path.join(directory, "pyproject.toml")
    try:
        data = bounded.loads_toml(bounded.read_bounded(path, regular=True).decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:  # UnicodeDecodeError, TOMLDecodeError, or what tomllib does not wrap
        raise UsageError(f"{path}: not valid TOML ({exc})") from None
    project = _table(data, "project", path)
    dependency_groups = _table(data, "dependency-groups", path)
    if "project" not in data and not groups:
        raise UsageError(f"{path}: has no [project] table")
    reader = _Project(path, project, dependency_groups)
    requirements: list[Need] = reader.dependencies(tuple(extras)) if "project" in data else []
    for group in groups:
        requirements += reader.group(group, ())
    return RequirementSet(requirements=unique(requirements), constraints=())


def _table(data: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise UsageError(f"{path}: {key} must be a table")
    return value


class _Project:
    """Reads one pyproject.toml's dependency lists, resolving extras, groups and self-references."""

    def __init__(self, path: str, project: dict[str, Any], groups: dict[str, Any]) -> None:
        self.path = path
        self.project = project
        self.name = canonicalize_name(project["name"]) if isinstance(project.get("name"), str) else None
        dynamic = project.get("dynamic", [])
        self.dynamic = set(dynamic) if isinstance(dynamic, list) else set()
        optional = _table(project, "optional-dependencies", f"{path}: project")
        self.extras = {canonicalize_name(extra): (extra, value) for extra, value in optional.items()}
        self.groups = {canonicalize_name(group): (group, value) for group, value in groups.items()}

    def _strings(self, key: str, value: object) -> list[tuple[str, str]]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise UsageError(f"{self.path}: {key} must be an array of strings")
        return [(f"{key}[{i}]", item) for i, item in enumerate(value)]

    def dependencies(
        self, extras: tuple[str, ...], marker: Optional[str] = None, seen: frozenset[str] = frozenset(), depth: int = 0
    ) -> list[Need]:
        """The project's dependencies plus those of `extras`, each under `marker` when given;
        `depth`: how many self-references led here."""
        if depth > MAX_PROJECT_NESTING:
            raise UsageError(f"{self.path}: extras name the project itself more than {MAX_PROJECT_NESTING} deep")
        if "dependencies" in self.dynamic:
            raise UsageError(f"{self.path}: project.dependencies is dynamic; cudaresolve cannot read it without building the project")
        entries = self._strings("project.dependencies", self.project.get("dependencies", []))
        for extra in extras:
            key = canonicalize_name(extra)
            if key in seen:
                continue
            if key not in self.extras:
                if "optional-dependencies" in self.dynamic:
                    raise UsageError(f"{self.path}: project.optional-dependencies is dynamic; cudaresolve cannot read extra {extra!r} without building the project")
                known = ", ".join(sorted(spelled for spelled, _ in self.extras.values())) or "none"
                raise UsageError(f"{self.path}: unknown extra {extra!r} (known: {known})")
            spelled, value = self.extras[key]
            entries += self._strings(f"project.optional-dependencies.{spelled}", value)
            seen |= {key}
        return self._requirements(entries, marker, seen, depth)

    def group(self, group: str, including: tuple[str, ...]) -> list[Need]:
        """A PEP 735 dependency group with the groups it includes; an include cycle is an error."""
        key = canonicalize_name(group)
        if key not in self.groups:
            known = ", ".join(sorted(spelled for spelled, _ in self.groups.values())) or "none"
            raise UsageError(f"{self.path}: unknown dependency group {group!r} (known: {known})")
        if key in including:
            chain = " -> ".join(including[including.index(key):] + (key,))
            raise UsageError(f"{self.path}: dependency-groups include themselves ({chain})")
        if len(including) >= MAX_PROJECT_NESTING:
            raise UsageError(f"{self.path}: dependency-groups include groups more than {MAX_PROJECT_NESTING} deep")
        spelled, value = self.groups[key]
        where = f"dependency-groups.{spelled}"
        if not isinstance(value, list):
            raise UsageError(f"{self.path}: {where} must be an array")
        found: list[Need] = []
        for i, item in enumerate(value):
            if isinstance(item, str):
                found += self._requirements([(f"{where}[{i}]", item)], None, None, 0)
            elif isinstance(item, dict) and set(item) == {"include-group"} and isinstance(item["include-group"], str):
                found += self.group(item["include-group"], including + (key,))
            else:
                raise UsageError(f"{self.path}: {where}[{i}] must be a requirement string or {{include-group = \"...\"}}")
        return found

    def _requirements(
        self, entries: list[tuple[str, str]], marker: Optional[str], seen: Optional[frozenset[str]], depth: int
    ) -> list[Need]:
        """Parsed requirements under `marker`; `seen`: the extras already expanded (None: not even
        the base dependencies, as in a dependency group)."""
        found: list[Need] = []
        for key, text in entries:
            requirement = parse_requirement(text, f"{self.path}: {key}")
            own = requirement.marker and str(requirement.marker)
            both = f"({own}) and ({marker})" if own and marker else own or marker
            if self.name is not None and canonicalize_name(requirement.name) == self.name:
                if requirement.specifier:
                    raise UsageError(f"{self.path}: {key}: {text!r} names the project itself with a version")
                extras = {canonicalize_name(extra) for extra in requirement.extras}
                if seen is None or extras - seen:
                    # Expanded once per new extra: a self-reference inside what is being expanded adds nothing.
                    found += self.dependencies(tuple(sorted(extras - (seen or set()))), both, seen or frozenset(), depth + 1)
                continue
            if both is not None and both != own:
                requirement.marker = Marker(both)
            found.append(Need(requirement, Asked(f"{self.path}: {key}")))
        return found
