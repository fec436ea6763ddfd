"""The package's shape, read from the source with `ast`: no import circle, every arrow between rooms
runs downward, nothing in output/ imports the doctor's edge (commands/diagnosing, commands/result_cache),
a verdict type (does a build fit a host) is defined only in verdicts/, which the doctor's checks and the
resolver both use, and no problem or rejection record holds a verdict's facts under another name; driver releases and CUDA versions are read from text only by their value types, at
the edges listed below; and no function is longer than a reader can hold (MAX_FUNCTION_LINES).

An arrow is any import of a cudaresolve module (at the top, inside a function or under
TYPE_CHECKING: a circle through any of them is still a circle for a reader). Importing a package
that is the importer's own, or one of its ancestors (its `__init__`), is not an arrow: Python runs
that `__init__` first anyway. `python tests/test_structure.py` prints the figures.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Iterator

PACKAGE = Path(__file__).resolve().parent.parent / "cudaresolve"

# The rooms, lowest first (README "Layout"); a module's room is its subpackage or its own name.
LEVELS = {
    "base": 0,  # errors, versions, arch, records, bounded, caches, data
    "binary": 1,
    "knowledge": 2,  # knowledge/ and compat.py: tables and the pure rules over them
    "host": 3,
    "env": 3,
    "verdicts": 4,  # does a build fit a host: one rule, one record, for the doctor and the lock
    "checks": 5,
    "index": 5,
    "resolve": 6,
    "lockfile": 7,
    "output": 8,
    "commands": 9,  # with each use case's I/O edge: the doctor's (diagnosing, result_cache), the lock's (locking)
    "integrations": 9,
    "face": 9,  # cli.py, __main__.py
}
ROOM_OF_MODULE = {
    "cudaresolve": "base",
    "cudaresolve.errors": "base",
    "cudaresolve.versions": "base",
    "cudaresolve.arch": "base",
    "cudaresolve.records": "base",
    "cudaresolve.bounded": "base",
    "cudaresolve.caches": "base",
    "cudaresolve.compat": "knowledge",
    "cudaresolve.cli": "face",
    "cudaresolve.__main__": "face",
}
# Rooms of one level that must not import each other this way (the house drawing's "never" arrows).
NEVER = {("checks", "index")}
def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def room(module: str) -> str:
    if module in ROOM_OF_MODULE:
        return ROOM_OF_MODULE[module]
    part = module.split(".")[1]
    return "base" if part == "data" else part


def _imported(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield submodule if submodule in known else base


def graph() -> dict[str, set[str]]:
    """module -> the cudaresolve modules it imports."""
    found = modules()
    known = set(found)
    arrows: dict[str, set[str]] = {}
    for module, path in found.items():
        tree = ast.parse(path.read_text(), str(path))
        targets = set()
        for name in _imported(tree, module, path.name == "__init__.py", known):
            while name and name not in known:  # `import cudaresolve.x.y` names a module; a missing one its package
                name = name.rpartition(".")[0]
            if not name or name == module or module.startswith(name + "."):
                continue  # not ours, itself, or its own package's __init__
            targets.add(name)
        arrows[module] = targets
    return arrows


def cycles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(arrows.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for node in sorted(arrows):
        if node not in index:
            visit(node)
    return sorted(found)


def upward(arrows: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Arrows from a lower room to a higher one, or between rooms of one level that must not meet."""
    return sorted(
        (source, target)
        for source, targets in arrows.items()
        for target in targets
        if LEVELS[room(source)] < LEVELS[room(target)] or (room(source), room(target)) in NEVER
    )


def test_the_import_graph_has_no_circle():
    assert cycles(graph()) == []


def test_every_arrow_between_rooms_runs_downward():
    assert upward(graph()) == []


def test_nothing_in_output_imports_the_doctor_or_its_result_cache():
    arrows = graph()
    assert {
        (source, target)
        for source, targets in arrows.items() if source.startswith("cudaresolve.output")
        for target in targets if target in ("cudaresolve.commands.diagnosing", "cudaresolve.commands.result_cache")
    } == set()


def test_the_graph_reader_sees_every_kind_of_import():
    """The reader is not vacuous: it finds top-level, relative, function-level and TYPE_CHECKING imports."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "import cudaresolve.versions\n"
        "from . import loader\n"
        "from ..knowledge import toolkits\n"
        "if TYPE_CHECKING:\n"
        "    from cudaresolve.env.environment import Environment\n"
        "def f():\n"
        "    from cudaresolve.checks import judge\n"
    )
    known = {"cudaresolve.versions", "cudaresolve.binary.loader", "cudaresolve.knowledge.toolkits",
             "cudaresolve.env.environment", "cudaresolve.checks"}
    found = set(_imported(ast.parse(source), "cudaresolve.binary.elf", False, known))
    assert known <= found
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def classes(tree: ast.AST) -> set[str]:
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


def verdicts_defined_outside(trees: dict[str, ast.AST]) -> dict[str, set[str]]:
    """module -> the classes it defines under a name a verdict type of verdicts/ has: a second
    record for one rule, which the doctor and the lock would word and judge apart."""
    verdicts = set().union(*(classes(tree) for module, tree in trees.items() if room(module) == "verdicts"))
    return {module: found for module, tree in trees.items()
            if room(module) != "verdicts" and (found := classes(tree) & verdicts)}


PLAIN = {"Optional", "Union", "tuple", "str", "int", "bool", "None"}  # wrappers and builtins: they tell no fact apart


def facts(node: ast.ClassDef) -> frozenset[str]:
    """The value types a record's fields hold (ComputeCapability, GpuRef, DriverRelease ...)."""
    annotations = [item.annotation for item in node.body if isinstance(item, ast.AnnAssign)
                   and not (isinstance(item.annotation, ast.Subscript) and getattr(item.annotation.value, "id", "") == "ClassVar")]
    return frozenset(name.id for annotation in annotations for name in ast.walk(annotation)
                     if isinstance(name, ast.Name) and name.id not in PLAIN)


VERDICT_HOLDERS = ("cudaresolve.checks.problems", "cudaresolve.resolve.reasons")  # the doctor's problems, the rejections' grounds


def renamed_verdicts(trees: dict[str, ast.AST]) -> dict[str, str]:
    """problem or grounds record -> the verdict whose facts it holds, two value types or more and no
    other: a verdict under another name (the doctor's NoKernelImage(cc, gpus) beside NoDeviceCode).
    One value type alone (a compute capability, a CUDA version) is too common to tell a copy, and
    evidence, fixes and host facts hold a verdict's facts without saying the build does not fit."""
    verdicts = {node.name: facts(node) for module, tree in trees.items() if room(module) == "verdicts"
                for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    return {f"{module}.{node.name}": verdict for module, tree in trees.items() if module in VERDICT_HOLDERS
            for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and len(found := facts(node)) >= 2
            for verdict, held in verdicts.items() if found <= held}


def test_verdict_types_are_defined_only_in_the_verdicts_room():
    trees = {module: ast.parse(path.read_text(), str(path)) for module, path in modules().items()}
    assert "DriverTooOld" in classes(trees["cudaresolve.verdicts.records"])
    assert verdicts_defined_outside(trees) == {}
    assert renamed_verdicts(trees) == {}
    # a second DriverTooOld in resolve/ is what the rule finds
    trees["cudaresolve.resolve.reasons"] = ast.parse("class DriverTooOld:\n    pass\n")
    assert verdicts_defined_outside(trees) == {"cudaresolve.resolve.reasons": {"DriverTooOld"}}
    # and a verdict's facts under another name: the doctor's old record for "no device code"
    trees["cudaresolve.checks.problems"] = ast.parse(
        "class NoKernelImage:\n    cc: ComputeCapability\n    gpus: tuple[GpuRef, ...]\n")
    assert renamed_verdicts(trees) == {"cudaresolve.checks.problems.NoKernelImage": "NoDeviceCode"}


# Where a driver release or a CUDA version is read from text: each edge calls the value type's own
# `parse` (records.py calls it for a record field typed CudaVersion or DriverRelease: the host JSON,
# the knowledge tables), and everything past an edge carries the values.
PARSING_EDGES = {
    "cudaresolve.versions": "the value types",
    "cudaresolve.records": "a JSON or TOML field typed CudaVersion or DriverRelease",
    "cudaresolve.commands.host_options": "--driver, --cuda and the variables that state them",
    "cudaresolve.host.nodes": "GPU Feature Discovery's labels on a Kubernetes node",
    "cudaresolve.host.sources": "what NVML, sysfs, procfs, libcuda and nvidia-smi print",
    "cudaresolve.knowledge.toolkits": "data/toolkits.toml (a GA driver may be a branch alone)",
    "cudaresolve.knowledge.components": "data/components.toml's CUDA update releases",
    "cudaresolve.knowledge.own_runtime": "data/own_runtime.toml's runtime releases (12.9.86, kept whole as read)",
    "cudaresolve.env.conda": "a conda prefix's cuda-version record",
    "cudaresolve.binary.runtime": "the toolkit a fatbin's note names",
    "cudaresolve.resolve.needs": "not yet: the lock's binary needs, carried as text there",
}
VALUE_TYPES = {"CudaVersion", "DriverRelease"}


def _version_reads(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, kind) for each use of a value type's parse ("parse"), each `int(x.split(".")[i])`
    ("split"), and each regular expression that takes nothing but dotted numbers, "12.4" but not
    "abc" ("regex")."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr == "parse" and isinstance(node.value, ast.Name)
                and node.value.id in VALUE_TYPES):
            yield node.lineno, "parse"
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and node.args
                and isinstance(node.args[0], ast.Subscript) and isinstance(node.args[0].value, ast.Call)
                and isinstance(node.args[0].value.func, ast.Attribute) and node.args[0].value.func.attr == "split"):
            yield node.lineno, "split"
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re" and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            pattern = re.compile(node.args[0].value)
            if pattern.fullmatch("12.4") and not pattern.fullmatch("abc") and not pattern.fullmatch("1a"):
                yield node.lineno, "regex"


def version_reads(kind: str) -> dict[str, list[int]]:
    """module -> the lines where it reads dotted numbers in the way `kind` names."""
    found = {}
    for module, path in modules().items():
        lines = [line for line, what in _version_reads(ast.parse(path.read_text(), str(path))) if what == kind]
        if lines:
            found[module] = sorted(lines)
    return found


# The regular expressions for dotted numbers, one per kind of number, each where its kind is defined.
NUMBER_SHAPES = {
    "cudaresolve.versions": "CUDA versions and driver releases",
    "cudaresolve.arch": "compute capabilities (8.6) and arch lists",
    "cudaresolve.host.sources": "nvidia-smi's compute_cap column, before ComputeCapability reads it",
    "cudaresolve.env.conda": "the leading release numbers of a conda version that is not PEP 440",
    "cudaresolve.knowledge.wheel_facts": "a PTX ISA in data/wheel_facts.toml",
    "cudaresolve.resolve.targets": "a lock target's Python X.Y (--python-version, the interpreter's) and its hosts' glibc",
}


def test_only_the_edges_read_driver_releases_and_cuda_versions():
    assert {module: lines for module, lines in version_reads("parse").items() if module not in PARSING_EDGES} == {}


def test_no_version_is_split_by_hand():
    assert version_reads("split") == {}


def test_one_regular_expression_per_kind_of_number():
    assert {module: lines for module, lines in version_reads("regex").items() if module not in NUMBER_SHAPES} == {}
    assert len(version_reads("regex")["cudaresolve.versions"]) == 2  # a CUDA version, a driver release


def test_the_version_reader_is_not_vacuous():
    source = (
        "import re\n"
        "a = CudaVersion.parse(text)\n"
        "b = int(release.split('.')[0])\n"
        "c = re.match(r'^(\\d+)\\.(\\d+)$', text)\n"
        "d = re.match(r'[A-Za-z0-9.]+', name)\n"
        "check = records.check(DriverRelease.parse)\n"
    )
    assert sorted(_version_reads(ast.parse(source))) == [(2, "parse"), (3, "split"), (4, "regex"), (6, "parse")]
    assert "cudaresolve.commands.host_options" in version_reads("parse")


# The most lines a function may span, `def` to its last line (its docstring included). The functions
# listed are longer, each with its length, and may only shrink: splitting lockfile/check.py's `checked`
# is the verdicts room's work; once it is split, its line goes.
MAX_FUNCTION_LINES = 80
LONGER_FUNCTIONS: dict[str, int] = {}


def _function_lengths(tree: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
    """(dotted name, lines) of every function in `tree`, methods and nested functions included."""
    for node in ast.iter_child_nodes(tree):
        name = f"{prefix}.{node.name}" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else prefix
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno is not None  # ast.parse sets it
            yield name, node.end_lineno - node.lineno + 1
        yield from _function_lengths(node, name)


def long_functions() -> dict[str, int]:
    """Every function of the package longer than MAX_FUNCTION_LINES, with its length."""
    return {
        name: lines
        for module, path in modules().items()
        for name, lines in _function_lengths(ast.parse(path.read_text(), str(path)), module)
        if lines > MAX_FUNCTION_LINES
    }


def test_no_function_is_longer_than_80_lines():
    found = long_functions()
    assert {name: lines for name, lines in found.items() if lines > LONGER_FUNCTIONS.get(name, MAX_FUNCTION_LINES)} == {}
    assert set(LONGER_FUNCTIONS) <= set(found), "a listed function is 80 lines or fewer now: drop its line"


def test_the_function_measure_is_not_vacuous():
    source = "class C:\n    def long(self):\n" + "        x = 1\n" * 80 + "def outer():\n    def inner():\n        pass\n    return inner\n"
    assert dict(_function_lengths(ast.parse(source), "m")) == {"m.C.long": 81, "m.outer": 4, "m.outer.inner": 2}


def figures() -> dict[str, object]:
    arrows = graph()
    return {
        "modules": len(arrows),
        "arrows": sum(len(targets) for targets in arrows.values()),
        "upward": upward(arrows),
        "cycles": cycles(arrows),
        "long": long_functions(),
    }


if __name__ == "__main__":
    result = figures()
    print(f"modules: {result['modules']}, import arrows: {result['arrows']}, "
          f"arrows running back up: {len(result['upward'])}, cycles: {len(result['cycles'])}, "
          f"functions over {MAX_FUNCTION_LINES} lines: {len(result['long'])}")
    for source, target in result["upward"]:
        print(f"  up: {source} -> {target}")
    for component in result["cycles"]:
        print(f"  cycle ({len(component)} modules): {', '.join(component)}")
    for name, lines in result["long"].items():
        print(f"  long: {name} ({lines} lines)")


def test_every_subpackage_is_installed():
    """pyproject.toml lists the packages a regular install (`pip install .`, the README's first command)
    copies: a room missing there imports in the editable test install and fails in users' hands."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    rooms = {".".join(init.parent.relative_to(PACKAGE.parent).parts) for init in PACKAGE.rglob("__init__.py")}
    assert rooms and rooms <= listed, sorted(rooms - listed)


def _string_constants(path: Path) -> Iterator[tuple[int, str]]:
    """The string literals of a module's code: not its docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_no_check_or_rule_names_a_distribution_the_tables_know():
    """A check's, a verdict's and the resolver's code name no distribution: what a package does is read
    from its files, or from the knowledge tables, which name it (torch through data/torch.toml's
    `distribution`). Any name a table knows, written as a literal in those rooms, is a row in code."""
    from cudaresolve.knowledge import components, cupy, torch

    known = {*torch.family(), *(row.name for major in cupy.load() for row in major.dists),
             *(row.dist for row in components.load().component)}
    assert "torch" in known and "nvidia-cublas-cu12" in known
    named = [f"{path.relative_to(PACKAGE)}:{line}: {value}"
             for room in ("checks", "verdicts", "resolve") for path in sorted((PACKAGE / room).rglob("*.py"))
             for line, value in _string_constants(path) if value in known]
    assert named == []
