"""What `import X` loads, read from a distribution's own Python files with `ast` (never executed).

From each top-level module of a distribution the import graph is followed through the modules its
RECORD lists, each edge marked by how it runs: at module level (`import`), inside a `try` whose
handler catches ImportError, OSError or Exception (`guarded`: the package goes on without it), under
an `if` on an environment variable (`opt-in`), or only inside a function (`lazy`: `__getattr__`,
a submodule's own function). A function the module body calls runs at the caller's reach, whether
the module defines it or imports it from another module of the package. The extension modules
reached are what the import loads by DT_NEEDED; the library loads in the modules on the way
(`ctypes.CDLL`, `ctypes.cdll.LoadLibrary`, a wheel's `load_library`, cuda-pathfinder's
`load_nvidia_dynamic_lib`, `dlopen`) are preloads, with their arguments resolved from literals,
module constants, loop variables, a called function's parameters and JSON lists of package data. A
name passed through a helper of the package (`_get_extension_path("_C")`, whose return the model
cannot compute) stands for the shipped file of that name with any extension suffix.

A loop that tries alternatives in turn (a `try` that leaves the loop when its loads work, a handler
that goes on to the next) and raises after the loop when none worked makes its loads `one-of`: the
import needs one of them, not each; the same loop called behind a handler is `guarded`.

A package whose import-time code imports by a computed name (`importlib.import_module(name)`) is not
conclusive: what it reaches is unknown, so nothing it does not reach is called on-demand. A library
load whose file is not known here gives the extension modules no import reaches its own reach.

Bounded: files, bytes per file, the depth of the import chain and the values an argument can take.
"""

from __future__ import annotations

import ast
import fnmatch
import heapq
import os
import re
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Literal, Mapping, Optional, Sequence

from cudaresolve.bounded import loads_json

Reach = Literal["import", "one-of", "guarded", "picked", "opt-in", "lazy", "unreached"]
IMPORT: Reach = "import"
ONE_OF: Reach = "one-of"  # one of the files a loop tries in turn must load, or the import raises
GUARDED: Reach = "guarded"
PICKED: Reach = "picked"  # one of several files a load by a computed name may open (checks/import_paths.py)
OPT_IN: Reach = "opt-in"
LAZY: Reach = "lazy"
UNREACHED: Reach = "unreached"  # an extension module no import of the package reaches
_RANK = {IMPORT: 0, ONE_OF: 1, GUARDED: 2, PICKED: 3, OPT_IN: 4, LAZY: 5, UNREACHED: 6}
_COMPUTED = "\x00"  # a part of a name computed at run time (an f-string's value), told apart from a glob's `*`
_HELPER = "\x01"  # marks a name a helper of the package turns into a path: kept only when a shipped file matches
_SUFFIXED = ".*so*"  # what a helper adds to a bare module name: any extension suffix (`.so`, `.cpython-311-...so`)

MAX_MODULES = 3000  # Python files parsed per distribution (torch 2.14 has about 2,600)
MAX_SOURCE = 2 * 1024 * 1024  # bytes per Python file
MAX_JSON = 64 * 1024  # bytes per package-data list
MAX_DEPTH = 64  # import chain length
MAX_VALUES = 256  # strings one argument can stand for
MAX_CALL_DEPTH = 4  # local functions called from module code, followed this deep
MAX_ACROSS = 64  # other modules parsed for a function module code calls from them
MAX_ACROSS_CALLS = 256  # calls into another module's function followed per distribution

_LOADERS = {"CDLL", "PyDLL", "LoadLibrary", "load_library", "load_nvidia_dynamic_lib", "dlopen"}
# torch's operator registry: a call naming "ns::op" that needs the operator to exist (the library that
# registers it has loaded), and one that defines the operator in Python (no library needed)
_NEEDS_OPERATOR = {"register_fake", "impl_abstract", "register_kernel", "register_autograd", "impl"}
_DEFINES_OPERATOR = {"custom_op", "triton_op", "define"}
_CAUGHT = {"ImportError", "ModuleNotFoundError", "OSError", "Exception", "BaseException", "RuntimeError"}
_EXTENSION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\.[A-Za-z0-9_-]+)?\.so$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Preload:
    """A library a module loads itself: the name the call gives (a file name, a glob for an f-string,
    or a component name for cuda-pathfinder), how the call is reached, and the module making it.
    `computed`: a part of the name is a value the code computes (the installed torch's release in
    `f"libaddon_torch{major}{minor}.so"`), so the call opens one of the files the name matches, not each."""

    name: str
    reach: Reach
    module: str
    computed: bool = False


@dataclass(frozen=True)
class ImportModel:
    """What importing a distribution's top-level modules loads."""

    conclusive: bool  # no import-time import by a computed name, no bound hit: unreached means not imported
    extensions: Mapping[str, tuple[str, Reach]]  # extension module path -> (module name, reach)
    preloads: tuple[Preload, ...]
    alternatives: Mapping[str, tuple[int, Optional[int]]] = field(default_factory=dict)  # path -> its CUDA release
    # top-level names of other packages' modules its import imports first (`import torch` in deep_gemm)
    imports: frozenset[str] = frozenset()

    def reach_of(self, path: str) -> Optional[Reach]:
        """How importing the package reaches the extension module at `path`; None when it is none."""
        found = self.extensions.get(path)
        return found[1] if found is not None else None


def weaker(a: Reach, b: Reach) -> Reach:
    return a if _RANK[a] >= _RANK[b] else b


def module_index(files: Iterable[str], site_packages: Sequence[str]) -> dict[str, str]:
    """Module name -> file for the Python files and extension modules among `files` (absolute paths)."""
    index: dict[str, str] = {}
    for path in sorted(files):
        inside = next((path[len(sp.rstrip("/")) + 1:] for sp in site_packages if path.startswith(sp.rstrip("/") + "/")), None)
        if inside is None:
            continue
        parts = inside.split("/")
        if not all(_IDENTIFIER.match(part) for part in parts[:-1]):
            continue
        name = parts[-1]
        if name.endswith(".py"):
            stem = name[:-3]
            module = parts[:-1] if stem == "__init__" else parts[:-1] + [stem]
            if module and (stem == "__init__" or _IDENTIFIER.match(stem)):
                index.setdefault(".".join(module), path)
        elif (match := _EXTENSION.match(name)) is not None:
            index.setdefault(".".join(parts[:-1] + [match.group(1)]), path)
    return index


def top_modules(index: Mapping[str, str], top_levels: Optional[Iterable[str]] = None) -> list[str]:
    """What a program imports of a distribution (`module_index`): its top-level modules, and the first
    modules under a namespace package."""
    tops = sorted(name for name in index
                  if not any(".".join(name.split(".")[:end]) in index for end in range(1, name.count(".") + 1)))
    if top_levels is not None:
        tops = [name for name in tops if name.split(".")[0] in set(top_levels)] or tops
    return tops


def build_model(
    files: Iterable[str],
    site_packages: Sequence[str],
    read_text: Callable[[str, int], Optional[str]],
    top_levels: Optional[Iterable[str]] = None,
) -> Optional[ImportModel]:
    """The model of one distribution from its RECORD `files`; `read_text(path, limit)` reads a file
    (None when it cannot). None when the distribution has no Python module to start from."""
    index = module_index(files, site_packages)
    tops = top_modules(index, top_levels)
    versioned = alternatives(path for path in files if ".so" in os.path.basename(path))
    if not any(index[top].endswith(".py") for top in tops):
        return ImportModel(False, {}, (), versioned) if versioned else None
    walker = _Walker(index, read_text, {top.split(".")[0] for top in tops})
    best: dict[str, Reach] = {}
    queue: list[tuple[int, int, str]] = [(0, 0, top) for top in tops]
    while queue:
        rank, depth, module = heapq.heappop(queue)
        reach = next(r for r, n in _RANK.items() if n == rank)
        if module in best or module not in index:
            continue
        best[module] = reach
        if depth >= MAX_DEPTH or not index[module].endswith(".py") or reach == LAZY:
            continue  # what a lazily imported module imports is lazy too: a warning either way, not read
        if len(walker.parsed) >= MAX_MODULES:
            walker.conclusive = False
            break
        for target, edge in walker.edges(module, reach):
            if target not in best:
                heapq.heappush(queue, (_RANK[weaker(reach, edge)], depth + 1, target))
    shipped = [os.path.basename(path) for path in files if ".so" in os.path.basename(path)]
    named: list[tuple[str, Reach, str, bool, bool]] = []
    for module, reach, name, computed, helper in walker.preloads:
        if helper and not any(fnmatch.fnmatchcase(file, name) for file in shipped):
            if reach != LAZY:  # a helper's name the model cannot match: a load of a file not known here
                walker.unnamed_loads.append((module, reach))
        else:
            named.append((module, reach, name, computed, helper))
    # a library load whose file the model cannot name (`torch.ops.load_library(where(name))`)
    # may open any extension module no import reaches: those load as soon as such a load runs
    unnamed = [weaker(best[module], reach) for module, reach in walker.unnamed_loads if module in best]
    defined = {op for _, _, op, defines in walker.operators if defines}
    registers = any(not defines and op not in defined and weaker(best[module], reach) == IMPORT
                    for module, reach, op, defines in walker.operators if module in best)
    if registers:
        # the import itself uses operators of the package's namespace that no Python code defines
        # (torchvision's `@register_fake("torchvision::nms")`): the load that registers them is needed
        unnamed = [IMPORT if reach == GUARDED else reach for reach in unnamed]
    otherwise = min(unnamed, key=_RANK.__getitem__) if unnamed else UNREACHED
    strongest: dict[str, Preload] = {}  # one per name: the call that runs soonest
    for module, reach, name, computed, helper in named:
        if module in best:
            reach = weaker(best[module], reach)
            if registers and helper and reach == GUARDED:  # the package's own file, loaded behind a handler
                reach = IMPORT
            found = Preload(name, reach, module, computed)
            if name not in strongest or _RANK[found.reach] < _RANK[strongest[name].reach]:
                strongest[name] = found
    preloads = tuple(strongest.values())
    extensions = {}
    for name, path in index.items():
        if not path.endswith(".py"):  # reached by an import, else by a load naming its file, else by a load of no known file
            loaded = [preload.reach for preload in preloads if fnmatch.fnmatchcase(os.path.basename(path), preload.name)]
            extensions[path] = (name, best.get(name, min([*loaded, otherwise], key=_RANK.__getitem__)))
    others = frozenset(name for module, reach, name in walker.others if module in best and weaker(best[module], reach) == IMPORT)
    return ImportModel(walker.conclusive, extensions, preloads, versioned, others)


class _Walker:
    """Parses modules and reads their imports and library loads, each at the reach it runs with."""

    def __init__(self, index: Mapping[str, str], read_text: Callable[[str, int], Optional[str]], tops: set[str]):
        self.index = index
        self.tops = tops  # the first names of this distribution's modules
        self.read_text = read_text
        self.parsed: set[str] = set()
        self.conclusive = True
        self.preloads: list[tuple[str, Reach, str, bool, bool]] = []  # (module, reach within it, name, computed, helper)
        self.others: list[tuple[str, Reach, str]] = []  # (module, reach within it, another package's top-level name)
        self.unnamed_loads: list[tuple[str, Reach]] = []  # (module, reach within it) of loads of a file not known here
        self.operators: list[tuple[str, Reach, str, bool]] = []  # (module, reach within it, "ns::op" of its own, defines)
        self.modules: dict[str, Optional[_Module]] = {}  # modules parsed for the functions others call from them
        self.across: set[tuple[str, int, int, Reach]] = set()  # (module, line, column, reach) of calls into another module followed

    def module(self, name: str) -> Optional["_Module"]:
        """Another module of the package, parsed for its functions (bounded by MAX_ACROSS); None when
        it is not a Python file here or cannot be read."""
        if name in self.modules:
            return self.modules[name]
        path = self.index.get(name)
        found = None
        if path is not None and path.endswith(".py") and len(self.modules) < MAX_ACROSS:
            text = self.read_text(path, MAX_SOURCE)
            try:
                found = _Module(name, path, text, ast.parse(text, filename=path)) if text is not None else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                found = None
        self.modules[name] = found
        return found

    def edges(self, module: str, reach: Reach) -> list[tuple[str, Reach]]:
        """(module imported, reach within this module) for each import `module`'s code makes."""
        self.parsed.add(module)
        path = self.index[module]
        text = self.read_text(path, MAX_SOURCE)
        if text is None:
            self.conclusive = False
            return []
        try:
            parsed = _Module(module, path, text, ast.parse(text, filename=path))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            self.conclusive = False
            return []
        found: list[tuple[str, Reach]] = []
        visit = parsed.visit(self, found)
        if not visit.loads and "\r" not in text:  # lines as ast numbers them: split at \n alone
            visit.import_lines = [number for number, line in enumerate(text.split("\n"), 1) if "import" in line]
        visit.statements(parsed.tree.body, IMPORT, parsed.scope, 0)
        return found


class _Module:
    """A parsed module of the package: its tree, its module scope and what its text names."""

    def __init__(self, name: str, path: str, text: str, tree: ast.Module):
        self.name = name
        self.path = path
        self.tree = tree
        self.scope = _Scope(tree.body, None)
        self.package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        self.loads = any(word in text for word in (*_LOADERS, "import_module", "__import__"))
        self.environ = "environ" in text or "getenv" in text
        self._from: Optional[dict[str, tuple[str, str]]] = None

    def visit(self, walker: "_Walker", found: list[tuple[str, Reach]]) -> "_Visit":
        visit = _Visit(walker, self.name, self.package, os.path.dirname(self.path), self.scope, found)
        visit.loads, visit.environ, visit.source = self.loads, self.environ, self
        return visit

    def imported_function(self, name: str, walker: "_Walker") -> Optional[tuple["_Module", ast.FunctionDef | ast.AsyncFunctionDef]]:
        """The function a module-level `from <module of the package> import f [as name]` binds to `name`."""
        if self._from is None:
            self._from = {}
            for node in _flat(self.tree.body, comprehensions=False):
                if isinstance(node, ast.ImportFrom):
                    base = _absolute(node.module, node.level, self.package)
                    for alias in node.names:
                        if base is not None and alias.name != "*":
                            self._from.setdefault(alias.asname or alias.name, (base, alias.name))
        target = self._from.get(name)
        if target is None or target[0].split(".")[0] not in walker.tops:
            return None
        other = walker.module(target[0])
        function = other.scope.functions.get(target[1]) if other is not None else None
        return (other, function) if other is not None and function is not None else None


class _Scope:
    """The names a block binds (assignments, loops, `with ... as`, parameters given at a call)."""

    def __init__(self, body: Sequence[ast.stmt], parent: Optional["_Scope"],
                 given: Optional[dict[str, list[tuple[ast.expr, "_Scope"]]]] = None):
        self.parent = parent
        self.body = body
        self.given: dict[str, list[tuple[ast.expr, "_Scope"]]] = given or {}
        self._bindings: Optional[dict[str, list[ast.expr]]] = None
        self._functions: Optional[dict[str, ast.FunctionDef | ast.AsyncFunctionDef]] = None

    @property
    def bindings(self) -> dict[str, list[ast.expr]]:
        """The block's assignments, read once when first asked (only a library load's or an import's
        argument is looked up): the walk into every expression for comprehensions is most of the cost."""
        if self._bindings is None:
            self._bindings = {}
            for node in _flat(self.body, comprehensions=True):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        for name in _names(target):
                            self._bindings.setdefault(name, []).append(node.value)
                elif isinstance(node, (ast.For, ast.comprehension)):
                    for name in _names(node.target):
                        self._bindings.setdefault(name, []).append(_Each(node.iter))
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    for name in _names(node.optional_vars):
                        self._bindings.setdefault(name, []).append(node.context_expr)
        return self._bindings

    @property
    def functions(self) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions the block defines, read once when first asked (each call by a bare name asks)."""
        if self._functions is None:
            self._functions = {}
            for node in _flat(self.body, comprehensions=False):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self._functions.setdefault(node.name, node)
        return self._functions

    def function(self, name: str) -> Optional[ast.FunctionDef | ast.AsyncFunctionDef]:
        scope: Optional[_Scope] = self
        while scope is not None:
            if name in scope.functions:
                return scope.functions[name]
            scope = scope.parent
        return None


class _Each(ast.expr):
    """An element of an iterable (what a loop variable stands for)."""

    def __init__(self, iterable: ast.expr):
        super().__init__()
        self.iterable = iterable


def _flat(body: Sequence[ast.stmt], comprehensions: bool) -> Iterator[ast.AST]:
    """The statements of a block and of its nested blocks, not entering functions or classes, with
    the `with` items and, with `comprehensions`, the loops' comprehensions."""
    todo: deque[ast.AST] = deque(body)
    while todo:
        node = todo.popleft()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.stmt, ast.withitem, ast.comprehension, ast.ExceptHandler)):
                todo.append(child)
            elif comprehensions and isinstance(child, ast.expr):
                todo.extend(c for c in ast.walk(child) if isinstance(c, ast.comprehension))


def _names(target: ast.AST) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _names(element)


def _dotted(node: ast.AST) -> str:
    """`a.b.c` of a Name/Attribute chain; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def _absolute(module: Optional[str], level: int, package: str) -> Optional[str]:
    """The absolute name of `from <level dots><module> import ...` in `package`; None past the top."""
    if level == 0:
        return module
    parts = package.split(".")
    if level - 1 >= len(parts) or not parts[0]:
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


def _tries_each(loop: ast.stmt, after: Sequence[ast.stmt]) -> bool:
    """Whether a `for` loop tries alternatives until one works and raises when none did: a `try` in its
    body whose handler catches the failure and whose success leaves the loop (`return`, `break`), and
    a `raise` after the loop (in its `else`, or in the block before any `return`)."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    leaves = any(isinstance(node, (ast.Return, ast.Break))
                 for statement in loop.body if isinstance(statement, ast.Try) and _catches(statement.handlers)
                 for node in _flat([*statement.body, *statement.orelse], comprehensions=False))
    if not leaves:
        return False
    if any(isinstance(statement, ast.Raise) for statement in loop.orelse):
        return True
    for statement in after:
        if isinstance(statement, ast.Raise):
            return True
        if isinstance(statement, ast.Return):
            return False
    return False


def _reads_environment(test: ast.expr) -> bool:
    return any(_dotted(node).endswith(("os.environ", "os.getenv", "environ.get", "os.environ.get")) or
               (isinstance(node, ast.Name) and node.id in ("environ", "getenv"))
               for node in ast.walk(test))


def _catches(handlers: Sequence[ast.ExceptHandler]) -> bool:
    """Whether one of these handlers catches a failed import or library load."""
    for handler in handlers:
        if handler.type is None:
            return True
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(_dotted(t).rpartition(".")[2] in _CAUGHT for t in types):
            return True
    return False


class _Visit:
    """One module's walk."""

    def __init__(self, walker: _Walker, module: str, package: str, directory: str, scope: _Scope,
                 found: list[tuple[str, Reach]]):
        self.walker = walker
        self.module = module
        self.package = package
        self.directory = directory
        self.module_scope = scope
        self.found = found
        self.called: set[tuple[str, Reach]] = set()
        self.loads = True  # the module's text names a library loader or an import by name
        self.environ = True  # the module's text reads the environment
        self.import_lines: Optional[list[int]] = None  # the lines holding "import", when nothing else matters in a function
        self.source: Optional[_Module] = None  # the parsed module, for the functions it imports from others

    def may_import(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Whether a function's body can import: in a module that loads nothing and imports nothing by
        name, a function's import statements are all that its walk finds, and each is on a line holding
        `import`; a function with none in its lines is not walked (most of a large module's text)."""
        lines = self.import_lines
        if lines is None:
            return True
        first = bisect_left(lines, function.lineno)
        return first < len(lines) and lines[first] <= (function.end_lineno or function.lineno)

    def statements(self, body: Sequence[ast.stmt], reach: Reach, scope: _Scope, depth: int) -> None:
        for number, statement in enumerate(body):
            if _tries_each(statement, body[number + 1:]):
                assert isinstance(statement, (ast.For, ast.AsyncFor))
                self.expressions([statement.iter], reach, scope, depth)
                for inner in statement.body:
                    self.statement(inner, reach, scope, depth, one_of=True)
                self.statements(statement.orelse, reach, scope, depth)
            else:
                self.statement(statement, reach, scope, depth)

    def statement(self, node: ast.stmt, reach: Reach, scope: _Scope, depth: int, one_of: bool = False) -> None:
        """`one_of`: `node` is in the body of a loop that tries alternatives (`_tries_each`)."""
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.imported(alias.name, reach)
        elif isinstance(node, ast.ImportFrom):
            base = self.absolute(node.module, node.level)
            if base is None:
                return
            self.imported(base, reach)
            for alias in node.names:
                if alias.name != "*" and f"{base}.{alias.name}" in self.walker.index:
                    self.imported(f"{base}.{alias.name}", reach)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.expressions(node.decorator_list, reach, scope, depth)  # run where the function is defined
            if depth == 0 and self.may_import(node):
                inner = _Scope(node.body, scope)
                self.statements(node.body, LAZY, inner, depth + 1)
        elif isinstance(node, ast.ClassDef):
            self.expressions(node.bases + node.decorator_list, reach, scope, depth)
            self.statements(node.body, reach, scope, depth)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            caught = ONE_OF if one_of else GUARDED  # a handler that goes on to the loop's next alternative
            body_reach = weaker(reach, caught) if _catches(node.handlers) else reach  # type: ignore[attr-defined]
            self.statements(node.body, body_reach, scope, depth)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                self.statements(handler.body, reach, scope, depth)  # runs when the body failed: not itself guarded
            self.statements(node.orelse, body_reach, scope, depth)  # type: ignore[attr-defined]
            self.statements(node.finalbody, reach, scope, depth)  # type: ignore[attr-defined]
        elif isinstance(node, ast.If):
            self.expressions([node.test], reach, scope, depth)
            if "TYPE_CHECKING" in _dotted(node.test):
                self.statements(node.orelse, reach, scope, depth)
                return
            switch = self.environ and _reads_environment(node.test)
            self.statements(node.body, weaker(reach, OPT_IN) if switch else reach, scope, depth)
            self.statements(node.orelse, reach, scope, depth)
        else:
            expressions = [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr)]
            expressions += [item.context_expr for item in getattr(node, "items", ())]
            self.expressions(expressions, reach, scope, depth)
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if isinstance(block, list):
                    self.statements([s for s in block if isinstance(s, ast.stmt)], reach, scope, depth)

    def expressions(self, nodes: Iterable[ast.expr], reach: Reach, scope: _Scope, depth: int) -> None:
        if reach == LAZY and not self.loads:
            return  # a function's calls matter only when they load a library or import by name
        for root in nodes:
            for node in ast.walk(root):
                if isinstance(node, ast.Call):
                    self.call(node, reach, scope, depth)

    def call(self, node: ast.Call, reach: Reach, scope: _Scope, depth: int) -> None:
        name = _dotted(node.func)
        last = name.rpartition(".")[2]
        if last in _NEEDS_OPERATOR | _DEFINES_OPERATOR and node.args and isinstance(node.args[0], ast.Constant):
            namespace, _, op = str(node.args[0].value).partition("::")
            if op and namespace in self.walker.tops:
                self.walker.operators.append((self.module, reach, op.partition("(")[0], last in _DEFINES_OPERATOR))
        if last in _LOADERS and node.args:
            named = self.values(node.args[0], scope, 0)
            program = isinstance(node.args[0], ast.Constant) and node.args[0].value is None  # CDLL(None): the process itself
            unnamed = not program and (not named or all(not value.replace(_COMPUTED, "").strip("*/.") for value in named))
            if unnamed and reach != LAZY:  # a function's own load of its parameter is named where it is called
                self.walker.unnamed_loads.append((self.module, reach))
            for value in sorted(named or ()):  # a set: sorted, so every run reads alike
                helper = _HELPER in value
                base = os.path.basename(value.replace(_HELPER, ""))
                computed = _COMPUTED in base
                base = base.replace(_COMPUTED, "*")
                if base and base.strip("*."):
                    self.walker.preloads.append((self.module, reach, base, computed, helper))
        elif last == "import_module" or name == "__import__":
            found = self.values(node.args[0], scope, 0) if node.args else None
            targets = {target.replace(_COMPUTED, "*") for target in found} if found else None
            anchor = next((k.value for k in node.keywords if k.arg == "package"), None)
            package = self.values(anchor, scope, 0) if anchor is not None else None
            if not targets:
                self.unknown(reach)
                return
            for target in targets:
                if target.startswith("."):
                    base = next(iter(package), self.package) if package else self.package
                    level = len(target) - len(target.lstrip("."))
                    resolved = self.absolute(target.lstrip(".") or None, level, base) or ""
                else:
                    resolved = target
                names = fnmatch.filter(self.walker.index, resolved) if "*" in resolved else [resolved]
                if not resolved or resolved.split(".")[-1] == "*" or not names:  # f".cu{major}": each build
                    self.unknown(reach)
                for name in names:
                    if name:
                        self.imported(name, reach)
        elif isinstance(node.func, ast.Name) and depth < MAX_CALL_DEPTH:
            function = scope.function(node.func.id)
            if function is None:
                self.call_across(node, node.func.id, reach, scope, depth)
                return
            if (function.name, reach) in self.called:
                return
            self.called.add((function.name, reach))
            given = {arg.arg: [(value, scope)] for arg, value in zip(function.args.args, node.args)}
            inner = _Scope(function.body, self.module_scope, given)
            self.statements(function.body, reach, inner, depth + 1)

    def call_across(self, node: ast.Call, name: str, reach: Reach, scope: _Scope, depth: int) -> None:
        """A call of a function this module imports from another module of the package
        (`from ._utils import load_libraries`): its body runs at the call's reach, in its own module."""
        found = self.source.imported_function(name, self.walker) if self.source is not None else None
        if found is None or reach == LAZY:
            return
        other, function = found
        key = (self.module, node.lineno, node.col_offset, reach)  # each call site once: its arguments name what it loads
        if key in self.walker.across or len(self.walker.across) >= MAX_ACROSS_CALLS:
            return
        self.walker.across.add(key)
        given = {arg.arg: [(value, scope)] for arg, value in zip(function.args.args, node.args)}
        visit = other.visit(self.walker, self.found)
        visit.statements(function.body, reach, _Scope(function.body, other.scope, given), depth + 1)

    def helper(self, name: str, scope: _Scope) -> bool:
        """Whether `name` is a function of the package (defined here or imported from another module of it)."""
        return scope.function(name) is not None or (
            self.source is not None and self.source.imported_function(name, self.walker) is not None)

    def unknown(self, reach: Reach) -> None:
        """An import by a name not known here, on the way of `import`: the model cannot say what it loads."""
        if reach != LAZY:
            self.walker.conclusive = False

    def absolute(self, module: Optional[str], level: int, package: Optional[str] = None) -> Optional[str]:
        return _absolute(module, level, package if package is not None else self.package)

    def imported(self, name: str, reach: Reach) -> None:
        parts = name.split(".")
        if parts[0] not in self.walker.tops and parts[0]:
            self.walker.others.append((self.module, reach, parts[0]))
        if parts[0] in self.walker.tops and name not in self.walker.index and reach == IMPORT:
            # a module of this package with no file (made at run time, sys.modules aliases), or an attribute
            if ".".join(parts[:-1]) not in self.walker.index:
                self.unknown(reach)
        for end in range(1, len(parts) + 1):
            prefix = ".".join(parts[:end])
            if prefix in self.walker.index:
                self.found.append((prefix, reach))

    def values(self, node: Optional[ast.expr], scope: _Scope, depth: int) -> Optional[set[str]]:
        """The strings `node` can stand for (a glob for the parts not known); None when unknown."""
        if node is None or depth > 8:
            return None
        if isinstance(node, ast.Constant):
            return {node.value} if isinstance(node.value, str) else None
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return self._union([self.values(e, scope, depth + 1) for e in node.elts])
        if isinstance(node, ast.Dict):
            return self._union([self.values(e, scope, depth + 1) for e in [*node.keys, *node.values] if e is not None])
        if isinstance(node, ast.IfExp):
            return self._union([self.values(node.body, scope, depth + 1), self.values(node.orelse, scope, depth + 1)])
        if isinstance(node, _Each):
            return self.values(node.iterable, scope, depth + 1)
        if isinstance(node, ast.Subscript):
            return self.values(node.value, scope, depth + 1)
        if isinstance(node, ast.Starred):
            return self.values(node.value, scope, depth + 1)
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return None
            current: Optional[_Scope] = scope
            while current is not None:
                if node.id in current.given:
                    return self._union([self.values(v, s, depth + 1) for v, s in current.given[node.id]])
                if node.id in current.bindings:
                    return self._union([self.values(v, current, depth + 1) for v in current.bindings[node.id]])
                current = current.parent
            return None
        if isinstance(node, ast.JoinedStr):
            texts = {""}
            for part in node.values:
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    known: Optional[set[str]] = {part.value}
                else:
                    known = self.values(part.value, scope, depth + 1) if isinstance(part, ast.FormattedValue) else None
                texts = {a + b for a in texts for b in (known or {_COMPUTED})}
                if len(texts) > MAX_VALUES:
                    return None
            return texts
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.values(node.left, scope, depth + 1) or {_COMPUTED}
            right = self.values(node.right, scope, depth + 1) or {_COMPUTED}
            joined = {a + b for a in left for b in right}
            return joined if len(joined) <= MAX_VALUES and joined != {_COMPUTED * 2} else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):  # pathlib: directory / name
            return self.values(node.right, scope, depth + 1)
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            last = name.rpartition(".")[2]
            if last in ("load", "loads") and name.startswith("json") and node.args:
                sources = self.values(node.args[0], scope, depth + 1)
                return self._json(sources) if sources else None
            if last in ("glob", "iglob", "join", "joinpath", "Path", "open", "read_text", "fspath", "str", "abspath", "realpath",
                        "normpath", "files"):
                args = node.args or ([node.func.value] if isinstance(node.func, ast.Attribute) else [])
                if last == "read_text" and isinstance(node.func, ast.Attribute):
                    args = [node.func.value]
                return self.values(args[-1], scope, depth + 1) if args else None
            if last in ("keys", "values", "items", "get", "copy", "sorted", "list", "tuple") :
                target = node.func.value if isinstance(node.func, ast.Attribute) and last not in (
                    "sorted", "list", "tuple") else (node.args[0] if node.args else None)
                return self.values(target, scope, depth + 1)
            if isinstance(node.func, ast.Name) and node.args and self.helper(node.func.id, scope):
                names = self.values(node.args[0], scope, depth + 1)
                return {_HELPER + (name if ".so" in name else name + _SUFFIXED) for name in names} if names else None
        if isinstance(node, ast.Attribute):
            return None
        return None

    def _union(self, parts: Iterable[Optional[set[str]]]) -> Optional[set[str]]:
        found: set[str] = set()
        known = False
        for part in parts:
            if part is not None:
                known = True
                found |= part
        return found if known and len(found) <= MAX_VALUES else None

    def _json(self, sources: set[str]) -> Optional[set[str]]:
        """The strings of a package-data JSON file named by `sources` (relative to this module's directory)."""
        found: set[str] = set()
        for source in sources:
            if not source.endswith(".json") or "*" in source or _COMPUTED in source:
                continue
            text = self.walker.read_text(os.path.normpath(os.path.join(self.directory, source)), MAX_JSON)
            if text is None:
                continue
            try:
                data = loads_json(text)
            except ValueError:
                continue
            found |= set(_strings(data))
        return found if found and len(found) <= MAX_VALUES else None


def _strings(data: object, depth: int = 0) -> Iterator[str]:
    """Every string of a JSON value (keys included), a few levels deep."""
    if depth > 6:
        return
    if isinstance(data, str):
        yield data
    elif isinstance(data, list):
        for item in data[:MAX_VALUES]:
            yield from _strings(item, depth + 1)
    elif isinstance(data, dict):
        for key, value in list(data.items())[:MAX_VALUES]:
            yield key
            yield from _strings(value, depth + 1)


def is_library_name(name: str) -> bool:
    """Whether a preload names a file (libfoo.so.1, a glob of one) rather than a component ("cublas")."""
    return ".so" in name or name.endswith(_SUFFIXED)


def matches(preload: str, file_name: str, soname: Optional[str]) -> bool:
    """Whether a file (its name, its soname) is what a preload of `preload` loads."""
    return fnmatch.fnmatchcase(file_name, preload) or (soname is not None and fnmatch.fnmatchcase(soname, preload))


# -- one library per CUDA release ---------------------------------------------------------------------

_VERSIONED_NAME = re.compile(r"(?<=[_.-])(?:cuda|cu)(\d{2,3})(?=[._-]|$)")
_VERSIONED_DIR = re.compile(r"^_?(?:cuda|cu)(\d{2,3})$")


def _cuda_of(digits: str) -> Optional[tuple[int, Optional[int]]]:
    """"117" -> (11, 7); "12" -> (12, None); None for what no CUDA release is named."""
    if len(digits) == 2:
        major = int(digits)
        return (major, None) if 9 <= major <= 19 else None
    major, minor = int(digits[:2]), int(digits[2:])
    return (major, minor) if 9 <= major <= 19 else None


NO_CUDA: tuple[int, Optional[int]] = (0, None)  # the alternative named without a release: no CUDA process picks it


def alternatives(paths: Iterable[str]) -> dict[str, tuple[int, Optional[int]]]:
    """path -> the CUDA release it is built for, for files a package ships once per CUDA release
    (lib<name>_cuda<NNN>.so, or under _cu<NN>/ or _cuda<NNN>/ directories): the names that, with the
    release taken out, are the same for two releases or more; and the file named without the release
    beside them (`<stem>.abi3.so` beside `<stem>_cu12.abi3.so`, `<stem>_cu13.abi3.so`), `NO_CUDA`."""
    paths = list(paths)
    groups: dict[str, dict[str, tuple[int, Optional[int]]]] = {}
    for path in paths:
        directory, name = os.path.split(path)
        parts = directory.split("/")
        key = None
        for index in range(len(parts) - 1, -1, -1):
            match = _VERSIONED_DIR.match(parts[index])
            cuda = _cuda_of(match.group(1)) if match else None
            if match and cuda:
                key = "/".join(parts[:index] + [parts[index].replace(match.group(1), "{}")] + parts[index + 1:] + [name])
                break
        if key is None:
            named = _VERSIONED_NAME.search(name)
            cuda = _cuda_of(named.group(1)) if named else None
            if named is None or cuda is None:
                continue
            key = directory + "/" + name[: named.start(1)] + "{}" + name[named.end(1):]
        if cuda is not None:
            groups.setdefault(key, {})[path] = cuda
    found = {path: cuda for group in groups.values() if len(set(group.values())) > 1 for path, cuda in group.items()}
    shipped = set(paths)
    for key, group in groups.items():  # the same name without a release: the build of no CUDA (ROCm's)
        plain = re.sub(r"[_.-]?(?:cuda|cu)\{\}", "", key, count=1)
        if len(set(group.values())) > 1 and plain != key and plain in shipped:
            found[plain] = NO_CUDA
    return found


def release_blind(path: str) -> str:
    """`path` without its CUDA release and the separator before it: the name a group of alternatives
    shares, the one named without a release included (hook_cu12.abi3.so, hook_cu13.abi3.so, hook.abi3.so)."""
    return _RELEASE.sub("", path)


_RELEASE = re.compile(r"[_.-]?(?:cuda|cu)\d{2,3}")


def picks(shipped: Mapping[str, tuple[int, Optional[int]]], runtime: tuple[int, int]) -> set[str]:
    """Of alternatives (path -> CUDA), those a process of CUDA `runtime` loads: per group of the
    same name, the one of its release, else the newest of its major below, else the oldest above;
    for alternatives named by major only, those of its major."""
    groups: dict[str, dict[str, tuple[int, Optional[int]]]] = {}
    for path, cuda in shipped.items():
        groups.setdefault(release_blind(path), {})[path] = cuda
    chosen: set[str] = set()
    for group in groups.values():
        same = sorted(((cuda[0], cuda[1] or 0), path) for path, cuda in group.items() if cuda[0] == runtime[0])
        if not same:
            continue
        if any(group[path][1] is None for _, path in same):
            chosen |= {path for _, path in same}
            continue
        exact = [path for cuda, path in same if cuda == runtime]
        below = [path for cuda, path in same if cuda < runtime]
        chosen.add(exact[0] if exact else below[-1] if below else same[0][1])
    return chosen


# -- namespace packages ---------------------------------------------------------------------------------

MAX_NAMESPACE_INIT = 16 * 1024  # a namespace __init__.py is a line or two


def is_namespace_init(text: str) -> bool:
    """Whether an `__init__.py` only makes its directory a namespace several distributions share: empty,
    docstrings and comments, `pkgutil.extend_path` or `pkg_resources.declare_namespace` (in a `try`
    or not). Loading any such file gives the same package, so which owner's bytes are there is moot."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return all(_namespace_statement(node) for node in tree.body)


def _namespace_statement(node: ast.stmt) -> bool:
    if isinstance(node, ast.Pass) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
        return True
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return all(alias.name.split(".")[0] in ("pkgutil", "pkg_resources", "extend_path", "declare_namespace")
                   for alias in node.names) or (isinstance(node, ast.ImportFrom) and node.module in ("pkgutil", "pkg_resources"))
    if isinstance(node, ast.Try):
        return all(_namespace_statement(s) for s in [*node.body, *node.orelse, *node.finalbody]
                   + [s for handler in node.handlers for s in handler.body])
    value = node.value if isinstance(node, (ast.Expr, ast.Assign, ast.AugAssign)) else None
    if value is None or (isinstance(node, ast.Assign) and [_dotted(t) for t in node.targets] != ["__path__"]):
        return False
    calls = {_dotted(call.func).rpartition(".")[2] for call in ast.walk(value) if isinstance(call, ast.Call)}
    return bool(calls) and calls <= {"extend_path", "declare_namespace", "__import__"}
