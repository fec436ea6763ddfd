"""Which file ld.so would load for each DT_NEEDED, and which symbols and versions would then fail to bind.

This emulates glibc's elf/dl-load.c `_dl_map_object` and the checks that follow it, so that
`doctor` can say "libcusparse.so.12 binds to the libnvJitLink.so.12 under $ORIGIN/../../nvjitlink/lib,
which lacks __nvJitLinkComplete_12_4" without loading anything. Decisions never shell out: the
cache is parsed (ldcache.py) and files are judged from their facts, read through the injected
`facts_of` so the environment scan can serve cached facts and tests can serve plain data.

Search order for a name without a slash, as glibc does it:
  1. an object already loaded whose name or soname matches (the `preloaded` map comes first);
  2. DT_RPATH of the loading object, then of its loader, up the chain, then of the main program
     (the interpreter: conda's python carries DT_RPATH `$ORIGIN/../lib`, which is how a conda
     prefix's lib/ serves extension modules) — all skipped when the loading object has
     DT_RUNPATH (an object with DT_RUNPATH contributes no DT_RPATH, and neither does such a program);
  3. LD_LIBRARY_PATH; 4. DT_RUNPATH of the loading object only;
  5. /etc/ld.so.cache; 6. the default directories. A loading object with DF_1_NODEFLIB skips 6
     and the cache entries that lie in the default directories.
Candidates for another machine or ELF class are passed over; a file that is not an ELF object
stops the search with ld.so's error.

When the main program is known (`LoaderEnv.program`), it and its DT_NEEDED tree are loaded first:
they are the global scope, which ld.so searches before a dlopened object's own scope. So an old
extension that calls `sin` without linking libm binds to the libm the interpreter (or its
libpython) loaded, as it does under Python; and a soname the program loaded is already loaded for
every root. The program's own misses are not reported: a program that runs has found its libraries.

Roots are loaded in order into one namespace, each like a library the program dlopens (its
loader chain ends at the program, whose DT_RPATH glibc searches last in step 2): its local scope is
its own dependency tree in breadth-first order, which is where its objects' symbols are looked
up after the global scope (as `ldd -r <root>` does, plus the program's). Not blamed: weak references,
Py*/_Py* names (the interpreter provides them where the program is not known), anything of the
driver's libraries, and symbols a missing library (or, for
unversioned ones, a driver library) in the scope could have provided — ld.so stops at the
missing library, while ldd would go on to list them all. Nor a symbol a partial symbol table
(`BinaryFacts.symbols_complete` false: a knowledge-table row) in the scope could hold.

Not emulated: glibc-hwcaps and legacy hwcap subdirectories of each search directory (wheels do
not ship them; ld.so would prefer them where present), secure mode, `$ORIGIN` in LD_LIBRARY_PATH
(needs the main program; such entries are dropped), and the rest of the global scope: LD_PRELOAD
objects and libraries loaded with RTLD_GLOBAL can satisfy symbols of objects that do not depend on
them; here they only count where a DT_NEEDED names them.

May import: binary/ (facts, the ELF reader, ld.so.cache), versions and errors; never env/ or host/.
"""

from __future__ import annotations

import functools
import os
import platform
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Final, Iterable, Iterator, List, Literal, Mapping, Optional, Sequence, Set, Tuple

from cudaresolve.binary.elf import ElfError
from cudaresolve.binary.facts import ELF_MAGIC, BinaryFacts, Symbol
from cudaresolve.binary.ldcache import LdCache, read_ld_cache
from cudaresolve.errors import UsageError
from cudaresolve.versions import CudaVersion

DF_1_NODEFLIB = 0x800

# Search steps (Resolution.step); "rpath" comes with the path of the object whose DT_RPATH matched.
Step = Literal[
    "path", "preloaded", "already loaded", "driver", "system", "rpath", "LD_LIBRARY_PATH", "runpath", "ld.so.cache",
    "default dir", "not found",
]
PATH: Final = "path"
PRELOADED: Final = "preloaded"
ALREADY_LOADED: Final = "already loaded"
DRIVER: Final = "driver"
SYSTEM: Final = "system"  # the C/C++ runtime of a host of another machine: present, not modelled
RPATH: Final = "rpath"
LD_LIBRARY_PATH: Final = "LD_LIBRARY_PATH"
RUNPATH: Final = "runpath"
LD_SO_CACHE: Final = "ld.so.cache"
DEFAULT_DIR: Final = "default dir"
NOT_FOUND: Final = "not found"

# Problem kinds.
ProblemKind = Literal["missing-library", "invalid-library", "missing-version", "undefined-symbol"]
MISSING_LIBRARY: Final = "missing-library"
INVALID_LIBRARY: Final = "invalid-library"
MISSING_VERSION: Final = "missing-version"
UNDEFINED_SYMBOL: Final = "undefined-symbol"

NO_SUCH_FILE = "cannot open shared object file: No such file or directory"

TRIPLETS = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}
INTERPRETERS = {"x86_64": "/lib64/ld-linux-x86-64.so.2", "aarch64": "/lib/ld-linux-aarch64.so.1"}
_ELF_MACHINES = {"x86_64": 62, "aarch64": 183}

FactsOf = Callable[[str], Optional[BinaryFacts]]


def read_header(path: str) -> Optional[bytes]:
    """The first 64 bytes of a file (an ELF header's size), None when it cannot be opened."""
    try:
        with open(path, "rb") as f:
            return f.read(64)
    except OSError:
        return None


@dataclass(frozen=True)
class LoaderEnv:
    """Everything outside the files that decides ld.so's choices, and the loader's only ways to the disk.

    `real_path` and `read_header` are the file-system seam besides `resolve`'s `facts_of`: a planned
    environment answers them from memory, an installed one from the disk.
    """

    machine: str  # "x86_64", "aarch64": candidates for other machines are skipped
    ld_library_path: tuple[str, ...] = ()  # split on ":" and ";"; "" means the current directory
    cache: LdCache = LdCache()
    default_dirs: tuple[str, ...] = ()
    lib: str = ""  # what $LIB expands to, "lib/x86_64-linux-gnu" or "lib64"
    platform: str = ""  # what $PLATFORM expands to
    preloaded: Mapping[str, str] = field(default_factory=dict)  # soname -> path, loaded before, in load order
    driver_libraries: frozenset[str] = frozenset()  # sonames the NVIDIA driver installs (libcuda.so.1, ...)
    # sonames the host's C/C++ runtime provides with no file here: a host of another machine (for_machine)
    system_libraries: frozenset[str] = frozenset()
    cwd: str = "/"  # what a relative object name or $ORIGIN is relative to
    program: Optional[str] = None  # the main program, symlinks resolved (glibc's $ORIGIN for it comes from /proc/self/exe)
    program_rpath: tuple[str, ...] = ()  # its DT_RPATH; () when it has none, or has DT_RUNPATH
    # one file under two names is loaded once; not compared: from_system's is a memo of os.path.realpath
    real_path: Callable[[str], str] = field(default=os.path.realpath, compare=False)
    read_header: Callable[[str], Optional[bytes]] = read_header  # why ld.so refuses a file our reader could not read

    @classmethod
    def from_system(
        cls,
        environ: Mapping[str, str],
        *,
        driver_libraries: frozenset[str],
        cache_path: str = "/etc/ld.so.cache",
        machine: Optional[str] = None,
        system_libraries: frozenset[str] = frozenset(),
    ) -> "LoaderEnv":
        """This machine's loader: its ld.so.cache, directory layout, LD_LIBRARY_PATH and LD_PRELOAD from `environ`.

        The dynamic linker itself is always loaded, so it is added to `preloaded`, followed by the
        LD_PRELOAD objects given by absolute path (ld.so matches them by file name, as a DT_NEEDED
        entry naming them would be). `machine` is the one whose files are judged (a target of
        another machine: `for_machine`, whose C/C++ runtime is `system_libraries`); None: this machine's.
        """
        if machine is not None and machine != host_machine():
            return for_machine(machine, driver_libraries=driver_libraries, system_libraries=system_libraries)
        machine = host_machine()
        triplet = TRIPLETS.get(machine, "")
        multiarch = bool(triplet) and any(os.path.isdir(f"{d}/{triplet}") for d in ("/lib", "/usr/lib"))
        default_dirs, lib = system_layout(machine, multiarch)
        loaded: Dict[str, str] = {}
        interpreter = INTERPRETERS.get(machine)
        if interpreter and os.path.exists(interpreter):
            loaded[os.path.basename(interpreter)] = interpreter
        for path in split_preload(environ.get("LD_PRELOAD", "")):
            loaded.setdefault(os.path.basename(path), path)
        return cls(
            machine=machine,
            ld_library_path=split_library_path(environ.get("LD_LIBRARY_PATH", "")),
            cache=read_ld_cache(cache_path),
            default_dirs=default_dirs,
            lib=lib,
            platform=machine,
            preloaded=loaded,
            driver_libraries=driver_libraries,
            cwd=os.getcwd(),
            # the checks ask for the same system libraries again and again
            real_path=functools.lru_cache(maxsize=None)(os.path.realpath),
        )


def host_machine() -> str:
    """The machine this process runs on, normalised as ELF files name it ("x86_64", "aarch64")."""
    machine = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine)


def for_machine(
    machine: str, *, driver_libraries: frozenset[str] = frozenset(), system_libraries: frozenset[str] = frozenset()
) -> LoaderEnv:
    """The loader of a `machine` host that is not this one (a lock for an aarch64 fleet made on an
    x86_64 machine): its files are judged, others are foreign; nothing of this machine's system
    (ld.so.cache, LD_LIBRARY_PATH, LD_PRELOAD) applies, and its default directories are the
    multiarch layout of the distributions GPU hosts run (Ubuntu/Debian: /usr/lib/aarch64-linux-gnu).
    Its C/C++ runtime (`system_libraries` and its dynamic linker) is taken as present, as the
    driver's libraries are: a name such a library could define is not blamed."""
    if machine not in TRIPLETS:
        raise UsageError(f"no loader model for machine {machine!r} (only {', '.join(sorted(TRIPLETS))})")
    default_dirs, lib = system_layout(machine, multiarch=True)
    system = system_libraries | {os.path.basename(INTERPRETERS[machine])} if system_libraries else frozenset()
    return LoaderEnv(machine=machine, default_dirs=default_dirs, lib=lib, platform=machine,
                     driver_libraries=driver_libraries, system_libraries=system)


def with_program(env: LoaderEnv, path: str, facts: BinaryFacts) -> LoaderEnv:
    """`env` for a process whose main program is the file at `path` (symlinks resolved) with these
    facts: its DT_RPATH joins every search that DT_RPATH steps apply to, after the loader chain's."""
    return replace(env, program=path, program_rpath=() if facts.runpath else facts.rpath)


def system_layout(machine: str, multiarch: bool) -> tuple[tuple[str, ...], str]:
    """(default search directories, $LIB) of glibc as distributions build it.

    Debian/Ubuntu (multiarch) search /lib/<triplet>, /usr/lib/<triplet>, /lib, /usr/lib and expand
    $LIB to lib/<triplet>; Fedora, RHEL, SUSE and upstream glibc use /lib64, /usr/lib64 and lib64.
    """
    if multiarch:
        triplet = TRIPLETS[machine]
        return (f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib"), f"lib/{triplet}"
    return ("/lib64", "/usr/lib64"), "lib64"


def split_library_path(value: str) -> tuple[str, ...]:
    """LD_LIBRARY_PATH as ld.so splits it: on ":" and ";", empty entries meaning the current directory."""
    if not value:
        return ()
    return tuple(re.split("[:;]", value))


def split_preload(value: str) -> tuple[str, ...]:
    """LD_PRELOAD's absolute paths, split on spaces and ":" as ld.so does; names without a slash are
    searched for by ld.so and are not modelled."""
    return tuple(entry for entry in re.split("[ :]", value) if entry.startswith("/"))


@dataclass(frozen=True)
class Resolution:
    """The answer for one DT_NEEDED entry of one object."""

    needed: str
    path: Optional[str]  # the file chosen (or refused); None when not found or provided by the driver
    step: Step
    rpath_of: Optional[str] = None  # for step "rpath": the object whose DT_RPATH held the directory
    skipped: tuple[str, ...] = ()  # files found on the way but passed over (other machine or ELF class)
    error: Optional[str] = None  # ld.so's message when this entry fails to load

    @property
    def why(self) -> str:
        return f"rpath of {self.rpath_of}" if self.step == RPATH else self.step


@dataclass(frozen=True)
class LoadedObject:
    """One object in the namespace, with how it got there and what its DT_NEEDED entries resolved to."""

    path: str  # as ld.so names it: the root as given, or search directory + "/" + name, not normalized
    soname: Optional[str]
    loaded_by: Optional[str]  # the object whose DT_NEEDED brought it in; None for roots and preloaded objects
    why: str  # "root", or the search step that found it
    needed: tuple[Resolution, ...]


@dataclass(frozen=True)
class Problem:
    """Something ld.so would refuse, with its own wording in `message`."""

    kind: ProblemKind
    message: str
    consumer: str  # the object that needs the library, version or symbol
    needed: Optional[str]  # the DT_NEEDED name (library problems), the provider's soname (versioned); None: unversioned symbol
    provider: Optional[str] = None  # the file the loader chose for it
    provider_step: Optional[str] = None  # why that file was chosen ("runpath", "rpath of X", ...)
    symbol: Optional[str] = None
    version: Optional[str] = None
    min_provider_version: Optional[CudaVersion] = None  # 12.4 for __nvJitLinkComplete_12_4


@dataclass(frozen=True)
class LoadResult:
    objects: tuple[LoadedObject, ...]  # load order (a preloaded object is listed where first needed)
    problems: tuple[Problem, ...]


def resolve(roots: Sequence[str], *, facts_of: FactsOf, env: LoaderEnv) -> LoadResult:
    """Load `roots` in order as ld.so would, then check versions and symbols of every object loaded.

    `facts_of(path)` returns the file's facts, None when no file is there, or raises ElfError
    when the file cannot be read as an ELF object.
    """
    return _Namespace(facts_of, env).run(roots)


def dlopen(name: str, caller: str, result: LoadResult, *, facts_of: FactsOf, env: LoaderEnv) -> Resolution:
    """What `dlopen(name)` called from the object at `caller` of `result`'s namespace opens: an object
    already loaded under that name, else the file ld.so finds searching as for a DT_NEEDED entry of
    `caller` (its DT_RPATH chain up its loaders, LD_LIBRARY_PATH, its DT_RUNPATH, the cache, the
    default directories). Its `path` is None when nothing is found."""
    objects = {obj.path: obj for obj in result.objects}
    for obj in result.objects:
        if obj.soname == name:
            return Resolution(name, obj.path, PRELOADED if obj.why == PRELOADED else ALREADY_LOADED)
        for res in obj.needed:
            if res.needed == name and res.path is not None and not res.error:
                return Resolution(name, res.path, PRELOADED if res.step == PRELOADED else ALREADY_LOADED)
    namespace = _Namespace(facts_of, env)
    chain: List[LoadedObject] = []
    current: Optional[str] = caller
    while current is not None and current in objects and len(chain) < len(objects):
        chain.append(objects[current])
        current = objects[current].loaded_by
    node: Optional[_Node] = None
    for obj in reversed(chain):
        facts = facts_of(obj.path)
        if facts is None:
            return Resolution(name, None, NOT_FOUND)
        node = _Node(obj.path, facts, node, None)
    if node is None:
        facts = facts_of(caller)
        if facts is None:
            return Resolution(name, None, NOT_FOUND)
        node = _Node(caller, facts, None, None)
    return namespace._map_needed(node, name)[0]


def min_provider_version(symbol: Symbol) -> Optional[CudaVersion]:
    """The provider release a versioned-name symbol implies: `__nvJitLinkComplete_12_4` -> 12.4.

    NVIDIA's convention (nvJitLink): the version node is the soname `libX.so.<major>` and the
    name ends in `_<major>_<minor>` of the header the consumer was built with.
    """
    if symbol.version is None or symbol.version != symbol.file:
        return None
    # Bounded ASCII digits: a symbol name is the file's text, and int() refuses 4,300 digits (or "²").
    name = re.search(r"_([0-9]{1,6})_([0-9]{1,6})$", symbol.name)
    soname = re.search(r"\.so\.([0-9]{1,6})$", symbol.version or "")
    if name is None or soname is None or name.group(1) != soname.group(1):
        return None
    return CudaVersion(int(name.group(1)), int(name.group(2)))


class _Node:
    """A loaded object while the namespace is being built."""

    def __init__(self, path: str, facts: BinaryFacts, loader: Optional["_Node"], found: Optional[Resolution]):
        self.path = path
        self.facts = facts
        self.loader = loader
        self.found = found  # the resolution that loaded it; None for roots
        self.names = {path} | ({facts.soname} if facts.soname else set())
        self.needed: Optional[List[tuple[Resolution, Optional["_Node"]]]] = None
        self.preloaded = False
        self.of_program = False  # in the main program's tree: the global scope, not checked

    @property
    def why(self) -> str:
        return "root" if self.found is None else self.found.why


class _Namespace:
    def __init__(self, facts_of: FactsOf, env: LoaderEnv):
        self.facts_of = facts_of
        self.env = env
        self.loaded: List[_Node] = []
        self.by_file: Dict[str, _Node] = {}
        self.facts: Dict[str, Optional[BinaryFacts]] = {}
        self.problems: List[Problem] = []

    def run(self, roots: Sequence[str]) -> LoadResult:
        global_scope = self._load_program()
        scopes = []
        for root in roots:
            node = self._load_root(root)
            scopes.append(self._map_dependencies(node))
        checked: Set[int] = set()  # id() of the nodes checked
        for scope in scopes:
            todo = [n for n in scope if id(n) not in checked and not n.preloaded and not n.of_program]
            checked.update(id(n) for n in todo)
            unjudgeable = any(res.step in (DRIVER, SYSTEM) or res.error for n in scope for res, _ in n.needed or ())
            lookup = global_scope + [n for n in scope if not n.of_program]
            for node in todo:
                self._check_versions(node)
                self._check_symbols(node, lookup, unjudgeable)
        # The program's objects are listed only where a root's tree needs one of them.
        used = {id(target) for n in self.loaded if not n.of_program for _, target in n.needed or ()}
        objects = tuple(
            LoadedObject(
                n.path,
                n.facts.soname,
                n.loader.path if n.loader else None,
                n.why,
                tuple(res for res, _ in n.needed or ()),
            )
            for n in self.loaded
            if not n.of_program or id(n) in used
        )
        return LoadResult(objects, tuple(self.problems))

    def _load_program(self) -> List[_Node]:
        """The main program and its dependency tree, breadth-first: the global scope. Empty when the
        program is not known or cannot be read; what its tree misses is not the roots' problem."""
        program = self.env.program
        if program is None:
            return []
        try:
            facts = self._read(program)
        except ElfError:
            return []
        if facts is None or facts.machine != self.env.machine:
            return []
        reported = len(self.problems)
        scope = self._map_dependencies(self._add(program, facts, None, None))
        del self.problems[reported:]
        for node in scope:
            node.of_program = True
        return scope

    # -- mapping -------------------------------------------------------------------------------

    def _read(self, path: str) -> Optional[BinaryFacts]:
        if path not in self.facts:
            self.facts[path] = self.facts_of(path)
        return self.facts[path]

    def _load_root(self, root: str) -> _Node:
        for node in self.loaded:
            if root in node.names:
                return node
        facts = self._read(root)
        if facts is None:
            raise UsageError(f"{root}: no such file")
        if facts.machine != self.env.machine:
            raise UsageError(f"{root} is a {facts.machine} object; the loader environment is {self.env.machine}")
        return self._add(root, facts, None, None)

    def _add(self, path: str, facts: BinaryFacts, loader: Optional[_Node], found: Optional[Resolution]) -> _Node:
        real = self.env.real_path(path)
        existing = self.by_file.get(real)
        if existing is not None:
            return existing
        node = _Node(path, facts, loader, found)
        self.loaded.append(node)
        self.by_file[real] = node
        return node

    def _map_dependencies(self, root: _Node) -> List[_Node]:
        """Map DT_NEEDED entries breadth-first from `root`; returns its scope (the search list)."""
        scope = [root]
        seen = {id(root)}
        for node in scope:  # grows while iterating: breadth-first
            if node.needed is None:
                node.needed = [self._map_needed(node, name) for name in node.facts.needed]
            for _, target in node.needed:
                if target is not None and id(target) not in seen:
                    seen.add(id(target))
                    scope.append(target)
        return scope

    def _find_loaded(self, name: str) -> Optional[_Node]:
        for node in self.loaded:
            if name in node.names:
                return node
        return None

    def _map_needed(self, loader: _Node, name: str) -> tuple[Resolution, Optional[_Node]]:
        if name in self.env.driver_libraries:
            return Resolution(name, None, DRIVER), None
        if name in self.env.system_libraries:
            return Resolution(name, None, SYSTEM), None
        preloaded = self.env.preloaded.get(name)
        if preloaded is not None and self._find_loaded(name) is None:
            facts = self._read(preloaded)
            if facts is None:
                raise UsageError(f"preloaded {name}: no file at {preloaded}")
            found = Resolution(name, preloaded, PRELOADED)
            node = self._add(preloaded, facts, None, found)
            node.preloaded = node.found is found
            node.names.add(name)
            return found, node
        loaded = self._find_loaded(name)
        if loaded is not None:
            return Resolution(name, loaded.path, PRELOADED if loaded.preloaded else ALREADY_LOADED), loaded
        candidates: Iterable[Tuple[str, Step, Optional[str]]]
        if "/" in name:
            candidates = [(name, PATH, None)]
        else:
            candidates = self._candidates(loader, name)
        skipped: List[str] = []
        for path, step, rpath_of in candidates:
            try:
                facts = self._read(path)
            except ElfError as exc:
                refusal = _refusal(self.env.read_header(path), path, self.env.machine, str(exc))
                if refusal is None:
                    skipped.append(path)
                    continue
                error = f"{path}: {refusal}"
                found = Resolution(name, path, step, rpath_of, tuple(skipped), error)
                self.problems.append(Problem(INVALID_LIBRARY, error, loader.path, name, path, found.why))
                return found, None
            if facts is None:
                continue
            if facts.machine != self.env.machine:
                skipped.append(path)
                continue
            found = Resolution(name, path, step, rpath_of, tuple(skipped))
            node = self._add(path, facts, loader, found)
            node.names.add(name)
            if node.path != path:  # the same file under another name: ld.so reuses the loaded object
                found = Resolution(name, node.path, step, rpath_of, tuple(skipped))
            return found, node
        error = f"{name}: {NO_SUCH_FILE}"
        found = Resolution(name, None, NOT_FOUND, None, tuple(skipped), error)
        self.problems.append(Problem(MISSING_LIBRARY, error, loader.path, name))
        return found, None

    def _candidates(self, loader: _Node, name: str) -> Iterator[Tuple[str, Step, Optional[str]]]:
        """(path, step, rpath_of) in ld.so's order; lazily, so a hit stops the expansion."""
        env = self.env
        if not loader.facts.runpath:
            chain: Optional[_Node] = loader
            while chain is not None:
                if chain.facts.rpath and not chain.facts.runpath:
                    for d in self._expand(chain.facts.rpath, self._origin(chain.path)):
                        yield _join(d, name), RPATH, chain.path
                chain = chain.loader
            if env.program is not None:
                for d in self._expand(env.program_rpath, os.path.dirname(env.program)):
                    yield _join(d, name), RPATH, env.program
        for d in self._expand(env.ld_library_path, None):
            yield _join(d, name), LD_LIBRARY_PATH, None
        if loader.facts.runpath:
            for d in self._expand(loader.facts.runpath, self._origin(loader.path)):
                yield _join(d, name), RUNPATH, None
        nodeflib = bool(loader.facts.flags_1 & DF_1_NODEFLIB)
        cached = env.cache.lookup(name, env.machine)
        if cached is not None and not (nodeflib and any(cached.startswith(_join(d, "")) for d in env.default_dirs)):
            yield cached, LD_SO_CACHE, None
        if not nodeflib:
            for d in env.default_dirs:
                yield _join(d, name), DEFAULT_DIR, None

    def _expand(self, entries: Sequence[str], origin: Optional[str]) -> List[str]:
        """Substitute $ORIGIN (the owner's directory; None for LD_LIBRARY_PATH), $LIB and $PLATFORM;
        an entry whose value is unknown is dropped, as ld.so does."""
        values = {"LIB": self.env.lib, "PLATFORM": self.env.platform, "ORIGIN": origin}
        out = []
        for entry in entries:
            unknown = False

            def substitute(match: "re.Match[str]") -> str:
                nonlocal unknown
                value = values[match.group(1) or match.group(2)]
                if value is None:
                    unknown = True
                    return ""
                return value

            expanded = _DST.sub(substitute, entry)
            if not unknown:
                out.append(expanded)
        return out

    def _origin(self, path: str) -> str:
        """The directory of an object as ld.so derives it from the object's name (no symlink resolution)."""
        full = path if path.startswith("/") else f"{self.env.cwd}/{path}"
        return full[: full.rindex("/")] or "/"

    # -- binding -------------------------------------------------------------------------------

    def _check_versions(self, node: _Node) -> None:
        """Each version a verneed entry asks of a loaded library must be defined there (dl-version.c)."""
        for need in node.facts.version_needs:
            if need.file in self.env.driver_libraries or need.file in self.env.system_libraries:
                continue
            provider = self._find_loaded(need.file)
            if provider is None or not provider.facts.version_definitions:
                continue  # missing library (reported), or "no version information available" (a warning)
            defined = set(provider.facts.version_definitions) | {provider.facts.soname}
            for version in need.versions:
                if version not in defined:
                    self.problems.append(
                        Problem(
                            MISSING_VERSION,
                            f"version `{version}' not found (required by {node.path})",
                            node.path,
                            need.file,
                            provider.path,
                            provider.why,
                            version=version,
                        )
                    )

    def _check_symbols(self, node: _Node, scope: Sequence[_Node], unjudgeable: bool) -> None:
        """Every non-weak undefined symbol must be found in the scope (do_lookup_x's rules).

        A scope object whose symbol table is partial (a knowledge-table row) lists only the
        definitions that cross components: those with a CUDA ABI suffix and those some table row
        binds. So a symbol is blamed there only when its consumer is such a row too, or its name
        carries the suffix; any other absence proves nothing and is not reported."""
        partial = node.facts.symbols_complete and any(not n.facts.symbols_complete for n in scope)
        for symbol in _unbound(node.facts.undefined, scope):
            if partial and min_provider_version(symbol) is None:
                continue
            provider = None
            if symbol.version is not None:
                if symbol.file in self.env.driver_libraries or symbol.file in self.env.system_libraries:
                    continue
                provider = self._find_loaded(symbol.file) if symbol.file else None
                if symbol.file and provider is None:
                    continue  # the library it comes from is missing: reported as such
            elif symbol.name.startswith(("Py", "_Py")) or unjudgeable:
                # Python's interpreter provides Py*; a driver or missing library in scope may provide the rest.
                continue
            message = f"undefined symbol: {symbol.name}"
            if symbol.version is not None:
                message += f", version {symbol.version}"
            self.problems.append(
                Problem(
                    UNDEFINED_SYMBOL,
                    message,
                    node.path,
                    symbol.file,
                    provider.path if provider else None,
                    provider.why if provider else None,
                    symbol.name,
                    symbol.version,
                    min_provider_version(symbol),
                )
            )


def _unbound(undefined: Sequence[Symbol], scope: Sequence[_Node]) -> List[Symbol]:
    """The non-weak symbols of `undefined` that no object of `scope` defines, in their order.

    Looked up object by object as ld.so does, but each object answers for all pending names at
    once through a set intersection: torch/_C.so's scope (33 objects) holds 115k definitions and 15k references.
    """
    pending: Dict[str, List[Symbol]] = {}
    for symbol in undefined:
        if symbol.binding != "WEAK":
            pending.setdefault(symbol.name, []).append(symbol)
    for node in scope:
        if not pending:
            return []
        definitions = node.facts.symbols.definitions
        for name in pending.keys() & definitions.keys():
            left = [s for s in pending[name] if not _binds(s, definitions[name], node.facts.version_definitions)]
            if left:
                pending[name] = left
            else:
                del pending[name]
    unbound = {id(symbol) for symbols in pending.values() for symbol in symbols}
    return [symbol for symbol in undefined if id(symbol) in unbound]


def _binds(wanted: Symbol, definitions: Sequence[Tuple[Optional[str], bool]], version_definitions: Sequence[str]) -> bool:
    """glibc's check_match: a versioned reference takes that version, or an unversioned (base)
    definition that is not hidden; an unversioned reference takes any default definition."""
    for version, hidden in definitions:
        if wanted.version is None:
            if not hidden:
                return True
        elif version == wanted.version or version not in version_definitions:
            return True
    return False


_DST = re.compile(r"\$(?:\{(ORIGIN|LIB|PLATFORM)\}|(ORIGIN|LIB|PLATFORM)(?![A-Za-z0-9_]))")


def _join(directory: str, name: str) -> str:
    """ld.so's directory + name: trailing slashes dropped, one added; an empty entry is "./"."""
    if not directory:
        return "./" + name
    stripped = directory.rstrip("/") or "/"
    return (stripped if stripped == "/" else stripped + "/") + name


def _refusal(head: Optional[bytes], path: str, machine: str, reason: str) -> Optional[str]:
    """Why ld.so would refuse a file our reader could not read, from its ELF header (open_verify).

    None means ld.so passes over it (another ELF class or machine, or a file it cannot open) and
    keeps searching.
    """
    if head is None:
        return None
    if len(head) < 64:
        return "file too short"
    if head[:4] != ELF_MAGIC:
        return "invalid ELF header"
    if head[4] != 2:
        return None  # other ELF class: skipped
    if head[5] != 1:
        return "ELF file data encoding not little-endian"
    if head[6] != 1:
        return "ELF file version ident does not match current one"
    if int.from_bytes(head[20:24], "little") != 1:
        return "ELF file version does not match current one"
    if int.from_bytes(head[18:20], "little") != _ELF_MACHINES.get(machine):
        return None  # other machine: skipped
    if int.from_bytes(head[16:18], "little") not in (2, 3):
        return "only ET_DYN and ET_EXEC can be loaded"
    # A header ld.so accepts, but our reader found the rest damaged: say what it found.
    return reason[len(path) + 2 :] if reason.startswith(path + ": ") else reason
