"""The static model of what `import X` loads (env/imports.py), by mechanism, on packages built here:
real extension modules (gcc against Python.h) and libraries laid out as wheels lay them out. The
oracle is the import itself, in a child interpreter with the built site-packages on sys.path.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from test_doctor_synthetic import glibc_dlopen_error, run, texts
from test_env_distributions import make_dist_info

from cudaresolve.env import imports as import_model
from cudaresolve.env.imports import GUARDED, IMPORT, LAZY, ONE_OF, OPT_IN, UNREACHED, alternatives, build_model, picks

NO_SUCH_FILE = "cannot open shared object file: No such file or directory"
INCLUDE = ["-I", sysconfig.get_paths()["include"]]


def extension(module: str, calls: str = "") -> str:
    """C source of an extension module `module` whose init calls `calls` (a function another library defines)."""
    declare = f"int {calls}(void);\n" if calls else ""
    call = f"{calls}();" if calls else ""
    return (f"#include <Python.h>\n{declare}static struct PyModuleDef m = {{PyModuleDef_HEAD_INIT, \"{module}\", NULL, -1, NULL}};\n"
            f"PyMODINIT_FUNC PyInit_{module}(void) {{ {call} return PyModule_Create(&m); }}\n")


def imports(site: Path, code: str, environ: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`code` run by a child interpreter with `site` first on sys.path."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env.update(environ or {})
    return subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {code}"],
                          capture_output=True, text=True, env=env)


def read_text(path: str, limit: int) -> str | None:
    try:
        return Path(path).read_text()[:limit]
    except OSError:
        return None


def model_of(site: Path, files: list[str]):
    return build_model([str(site / f) for f in files], [str(site)], read_text)


def serious(site: Path, tmp_path: Path, ld_library_path: str = "") -> list:
    return [(f.check, f.severity, f.subject, f.message) for f in texts(run(site, tmp_path, ld_library_path)) if f.severity != "info"]


# -- the graph, read without gcc --------------------------------------------------------------------

INIT = """
import os, ctypes, json
from . import _core
from .sub import helper
try:
    from . import _opt
except ImportError:
    _opt = None
if os.environ.get("PKG_TBB"):
    from . import _tbb
if TYPE_CHECKING:
    from . import _typing_only
_HERE = os.path.dirname(__file__)
LIBS = ["libA.so.1"]
def _load(name):
    ctypes.CDLL(os.path.join(_HERE, "lib", name))
for lib in LIBS:
    _load(lib)
with open(os.path.join(_HERE, "libs.json")) as f:
    for entry in json.load(f)["preload"]:
        ctypes.cdll.LoadLibrary(entry)
def __getattr__(name):
    from . import _lazy
    return _lazy
"""
HELPER = """
from cuda.pathfinder import load_nvidia_dynamic_lib
load_nvidia_dynamic_lib("cublas")
VERSION = "121"
ctypes.CDLL(f"libpkg_cuda{VERSION}.so")
"""
FILES = ["pkg/__init__.py", "pkg/sub/__init__.py", "pkg/sub/helper.py", "pkg/libs.json",
         "pkg/_core.cpython-311-x86_64-linux-gnu.so", "pkg/_opt.so", "pkg/_tbb.abi3.so", "pkg/_lazy.so",
         "pkg/_typing_only.so", "pkg/_never.so"]


@pytest.fixture
def graph(tmp_path):
    site = tmp_path / "site"
    for name in FILES:
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text("")
    (site / "pkg/__init__.py").write_text(INIT)
    (site / "pkg/sub/helper.py").write_text(HELPER)
    (site / "pkg/libs.json").write_text('{"preload": ["libC.so.3", "libD.so"]}')
    return site


def test_each_extension_module_is_marked_by_how_the_import_reaches_it(graph):
    model = model_of(graph, FILES)
    assert model.conclusive
    assert {name: reach for name, reach in model.extensions.values()} == {
        "pkg._core": IMPORT, "pkg._opt": GUARDED, "pkg._tbb": OPT_IN, "pkg._lazy": LAZY,
        "pkg._typing_only": UNREACHED, "pkg._never": UNREACHED,
    }


def test_library_loads_are_read_with_their_arguments(graph):
    model = model_of(graph, FILES)
    assert {(p.name, p.reach, p.module) for p in model.preloads if ".so" in p.name or p.name == "cublas"} == {
        ("libA.so.1", IMPORT, "pkg"),  # a module constant, through a local function's parameter
        ("libC.so.3", IMPORT, "pkg"), ("libD.so", IMPORT, "pkg"),  # a JSON list of package data
        ("cublas", IMPORT, "pkg.sub.helper"),  # cuda-pathfinder's component name
        ("libpkg_cuda121.so", IMPORT, "pkg.sub.helper"),  # an f-string of a module constant
    }


def test_an_import_by_a_computed_name_makes_the_model_inconclusive(graph):
    (graph / "pkg/__init__.py").write_text("import importlib, os\n_m = importlib.import_module(os.environ['X'])\n")
    assert not model_of(graph, FILES).conclusive
    (graph / "pkg/__init__.py").write_text("import importlib\n_m = importlib.import_module('._opt', __name__)\n")
    model = model_of(graph, FILES)
    assert model.conclusive and model.reach_of(str(graph / "pkg/_opt.so")) == IMPORT


def test_a_model_is_kept_by_the_files_it_read_and_read_again_when_one_changes(graph, tmp_path):
    """env/import_cache.py: a second run, and a copy of the tree elsewhere, parse nothing; a changed
    file (same size), a damaged entry, a planted one and one another build of the code wrote are parsed
    again; an unwritable cache only costs the parse."""
    from cudaresolve.env import import_cache
    from cudaresolve.env.import_cache import ImportModelCache

    files = [str(graph / f) for f in FILES]
    cache_dir = tmp_path / "cache"
    first = ImportModelCache(str(cache_dir))
    model = first.model(files, [str(graph)])
    assert first.parsed == 1 and model == model_of(graph, FILES)
    again = ImportModelCache(str(cache_dir))
    assert again.model(files, [str(graph)]) == model and again.parsed == 0
    copy = tmp_path / "elsewhere" / "site"
    copy.parent.mkdir()
    subprocess.run(["cp", "-al", str(graph), str(copy)], check=True)
    moved = ImportModelCache(str(cache_dir))
    assert moved.model([str(copy / f) for f in FILES], [str(copy)]) == model_of(copy, FILES) and moved.parsed == 0
    helper = graph / "pkg/sub/helper.py"
    helper.write_text(HELPER.replace('"cublas"', '"cufft_"'))  # same size, another library
    changed = ImportModelCache(str(cache_dir))
    assert ("cufft_", IMPORT, "pkg.sub.helper") in {(p.name, p.reach, p.module) for p in changed.model(files, [str(graph)]).preloads}
    assert changed.parsed == 1
    [entry] = [path for path in (cache_dir / "imports").rglob("*") if path.is_file()]
    for planted in (b"garbage", entry.read_bytes()[:40], b"cudaresolve-imports" + b"\x80\x04cos\nsystem\n."):
        entry.write_bytes(planted)
        healed = ImportModelCache(str(cache_dir))
        assert healed.model(files, [str(graph)]) == model_of(graph, FILES) and healed.parsed == 1
    entry.write_bytes(entry.read_bytes().replace(import_cache.HEADER, b"cudaresolve-imports 3 0.0.0 0123456789abcdef\n"))
    other_code = ImportModelCache(str(cache_dir))  # what another build of the walk wrote
    assert other_code.model(files, [str(graph)]) == model_of(graph, FILES) and other_code.parsed == 1
    code = b"".join(open(module, "rb").read() for module in (import_model.__file__, import_cache.__file__))
    assert import_cache.HEADER.split()[3].decode() == hashlib.sha256(code).hexdigest()[:16]
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be")
    assert ImportModelCache(str(blocked)).model(files, [str(graph)]) == model_of(graph, FILES)


NO_LOADS = (  # loads nothing and imports nothing by name: only its functions' import statements matter
    "import os\n"
    "@staticmethod\n"
    "def _a(x=1):\n    y = [i for i in range(3)]\n    from . import (\n        _core)\n    return y\n"
    "def _b():\n    return os.sep\n"
    "class K:\n    def m(self):\n        pass\n    def n(self):\n        from . \\\n            import _opt\n"
    "def _c(): from . import _tbb\n"
)


def test_a_function_with_no_import_line_is_left_out_and_one_with_is_read(graph):
    """In a module that loads nothing, a function whose lines hold no `import` is not walked; an
    import split over lines (parentheses, a backslash), in a method, or on the `def` line is found."""
    (graph / "pkg/__init__.py").write_text(NO_LOADS)
    walked = []
    original = import_model._Visit.may_import

    def recording(visit, function):
        answer = original(visit, function)
        walked.append((function.name, answer))
        return answer

    import_model._Visit.may_import = recording
    try:
        model = model_of(graph, FILES)
    finally:
        import_model._Visit.may_import = original
    assert sorted(walked) == [("_a", True), ("_b", False), ("_c", True), ("m", False), ("n", True)]
    reaches = {name: reach for name, reach in model.extensions.values()}
    assert (reaches["pkg._core"], reaches["pkg._opt"], reaches["pkg._tbb"]) == (LAZY, LAZY, LAZY)
    (graph / "pkg/__init__.py").write_bytes(NO_LOADS.replace("\n", "\r\n").encode())  # lines ast counts otherwise
    reaches = {name: reach for name, reach in model_of(graph, FILES).extensions.values()}
    assert (reaches["pkg._core"], reaches["pkg._opt"], reaches["pkg._tbb"]) == (LAZY, LAZY, LAZY)


def test_hostile_python_is_bounded_and_never_run(graph):
    (graph / "pkg/__init__.py").write_text("import os\nos._exit(7)\n" + "(" * 10000 + "\n")
    model = model_of(graph, FILES)
    assert model is not None and not model.conclusive  # unparsable: nothing is called on-demand


def test_alternatives_by_cuda_release_and_the_one_a_runtime_loads():
    paths = ["/s/pkg/libpkg_cuda117.so", "/s/pkg/libpkg_cuda121.so", "/s/pkg/libpkg_cuda124.so",
             "/s/pkg/_cu11/x.so", "/s/pkg/_cu12/x.so", "/s/pkg/libcudart.so.12", "/s/pkg/libcuda_only.so"]
    found = alternatives(paths)
    assert found == {"/s/pkg/libpkg_cuda117.so": (11, 7), "/s/pkg/libpkg_cuda121.so": (12, 1),
                     "/s/pkg/libpkg_cuda124.so": (12, 4), "/s/pkg/_cu11/x.so": (11, None), "/s/pkg/_cu12/x.so": (12, None)}
    assert picks(found, (12, 3)) == {"/s/pkg/libpkg_cuda121.so", "/s/pkg/_cu12/x.so"}
    assert picks(found, (12, 0)) == {"/s/pkg/libpkg_cuda121.so", "/s/pkg/_cu12/x.so"}
    assert picks(found, (11, 8)) == {"/s/pkg/libpkg_cuda117.so", "/s/pkg/_cu11/x.so"}


def test_the_file_named_without_a_release_beside_per_major_builds_is_no_cuda_processs():
    """torch-memory-saver 0.0.10 ships hook_cu12.abi3.so, hook_cu13.abi3.so and hook.abi3.so (its ROCm
    pick, which links libcudart.so.12 in that wheel): a CUDA 13 process loads the second only."""
    paths = ["/s/hook_cu12.abi3.so", "/s/hook_cu13.abi3.so", "/s/hook.abi3.so", "/s/other.abi3.so"]
    found = alternatives(paths)
    assert found == {"/s/hook_cu12.abi3.so": (12, None), "/s/hook_cu13.abi3.so": (13, None), "/s/hook.abi3.so": (0, None)}
    assert picks(found, (13, 0)) == {"/s/hook_cu13.abi3.so"}


# -- built packages, judged by the doctor and imported -----------------------------------------------

PRELOADING_INIT = """
import ctypes, json, os
_HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_HERE, "preload.json")) as f:
    for name in json.load(f)["libraries"]:
        ctypes.CDLL(os.path.join(_HERE, "lib", name))
from . import _core
"""


def preloading(elf_builder, listed: str) -> tuple[Path, Path]:
    """pkg, whose __init__.py preloads the libraries its lib/preload.json lists, then imports _core,
    which links libdep.so.1 with no path to it."""
    dep = elf_builder.build("libdep.so.1", "int dep(void) { return 1; }\n", soname="libdep.so.1", directory="site/pkg/lib")
    core = elf_builder.build("_core.so", extension("_core", "dep"), link=[dep], directory="site/pkg", extra=INCLUDE)
    site = elf_builder.root / "site"
    (site / "pkg/__init__.py").write_text(PRELOADING_INIT)
    (site / "pkg/preload.json").write_text(f'{{"libraries": [{listed}]}}')
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/preload.json", "pkg/_core.so", "pkg/lib/libdep.so.1"))
    return site, core


def test_a_library_an_init_preloads_from_a_json_list_satisfies_the_extension(elf_builder, tmp_path):
    site, core = preloading(elf_builder, '"libdep.so.1"')
    assert glibc_dlopen_error(core) == f"libdep.so.1: {NO_SUCH_FILE}"  # alone, the loader does not find it
    assert imports(site, "import pkg").returncode == 0  # the import does: the list loaded it first
    assert serious(site, tmp_path) == []


def test_without_the_preload_the_same_extension_is_an_import_time_error(elf_builder, tmp_path):
    site, _ = preloading(elf_builder, "")
    assert f"libdep.so.1: {NO_SUCH_FILE}" in imports(site, "import pkg").stderr
    assert serious(site, tmp_path) == [("missing-library", "error", "pkg 1.0", f"_core.so: libdep.so.1: {NO_SUCH_FILE}")]


def test_a_library_the_import_preloads_is_judged_in_full_not_as_a_plugin(elf_builder, tmp_path):
    """Its own needs are import-time: nothing links it, yet the import fails without them."""
    gone = elf_builder.build("libgone.so.1", "int gone(void) { return 1; }\n", soname="libgone.so.1", directory="gone")
    elf_builder.build("libdep.so.1", "int gone(void);\nint dep(void) { return gone(); }\n", soname="libdep.so.1",
                      link=[gone], directory="site/pkg/lib")
    (elf_builder.root / "gone/libgone.so.1").unlink()
    site = elf_builder.root / "site"
    (site / "pkg/__init__.py").write_text(
        "import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libdep.so.1'))\n")
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/lib/libdep.so.1"))
    assert f"libgone.so.1: {NO_SUCH_FILE}" in imports(site, "import pkg").stderr
    assert serious(site, tmp_path) == [("missing-library", "error", "pkg 1.0", f"libdep.so.1: libgone.so.1: {NO_SUCH_FILE}")]


OPTIONAL_INIT = """
import os
from . import _core
try:
    from . import _opt
except ImportError:
    _opt = None
if os.environ.get("PKG_TBB"):
    from . import _tbb
"""


def test_modules_off_the_import_path_cost_their_feature_not_the_package(elf_builder, tmp_path):
    """An env-var plugin and a submodule nothing imports: a warning naming them; a module the
    package guards with `except ImportError`: an info. The import works (and fails with the variable set)."""
    gone = elf_builder.build("libtbbx.so.12", "int tbb(void) { return 1; }\n", soname="libtbbx.so.12", directory="gone")
    elf_builder.build("_core.so", extension("_core"), directory="site/pkg", extra=INCLUDE)
    for module, directory in (("_opt", "site/pkg"), ("_tbb", "site/pkg"), ("_gpu", "site/pkg/extra")):
        elf_builder.build(f"{module}.so", extension(module, "tbb"), link=[gone], directory=directory, extra=INCLUDE)
    (elf_builder.root / "gone/libtbbx.so.12").unlink()
    site = elf_builder.root / "site"
    (site / "pkg/__init__.py").write_text(OPTIONAL_INIT)
    (site / "pkg/extra/__init__.py").write_text("from . import _gpu\n")
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/_core.so", "pkg/_opt.so", "pkg/_tbb.so",
                                              "pkg/extra/__init__.py", "pkg/extra/_gpu.so"))
    assert imports(site, "import pkg; assert pkg._opt is None").returncode == 0
    assert "libtbbx.so.12" in imports(site, "import pkg", {"PKG_TBB": "1"}).stderr
    assert "libtbbx.so.12" in imports(site, "import pkg.extra").stderr
    found = [(f.check, f.severity, f.message) for f in texts(run(site, tmp_path))]
    assert found == [
        ("missing-library", "warning", "optional features unavailable: pkg._tbb; pkg.extra._gpu (libtbbx.so.12 not installed)"),
        ("missing-library", "info", "optional feature unavailable: pkg._opt (libtbbx.so.12 not installed)"),
    ]


def test_an_inconclusive_import_keeps_every_module_on_the_import_path(elf_builder, tmp_path):
    gone = elf_builder.build("libtbbx.so.12", "int tbb(void) { return 1; }\n", soname="libtbbx.so.12", directory="gone")
    elf_builder.build("_tbb.so", extension("_tbb", "tbb"), link=[gone], directory="site/pkg", extra=INCLUDE)
    (elf_builder.root / "gone/libtbbx.so.12").unlink()
    site = elf_builder.root / "site"
    (site / "pkg/__init__.py").write_text("import importlib, os\nimportlib.import_module(os.environ.get('M', 'pkg._tbb'))\n")
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/_tbb.so"))
    assert "libtbbx.so.12" in imports(site, "import pkg").stderr
    assert [severity for _, severity, _, _ in serious(site, tmp_path)] == ["error"]


ALTERNATIVES_INIT = """
import ctypes, importlib, os
_lib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nvidia", "cuda_runtime", "lib")
ctypes.CDLL(os.path.join(_lib, "libcudart.so.12"))
_ops = importlib.import_module("._cuda121._ops", __name__)
"""


def test_only_the_alternative_of_the_process_cuda_runtime_is_judged(elf_builder, tmp_path):
    """pkg ships _cuda117/_ops.so (links libcudart.so.11.0, absent) and _cuda121/_ops.so (links
    libcudart.so.12 of the installed nvidia-cuda-runtime-cu12 12.1.105): a process of that runtime
    imports the second; the first is not this environment's."""
    old = elf_builder.build("libcudart.so.11.0", "int rt(void) { return 11; }\n", soname="libcudart.so.11.0", directory="gone")
    new = elf_builder.build("libcudart.so.12", "int rt(void) { return 12; }\n", soname="libcudart.so.12",
                            directory="site/nvidia/cuda_runtime/lib")
    elf_builder.build("_ops.so", extension("_ops", "rt"), link=[old], directory="site/pkg/_cuda117", extra=INCLUDE)
    elf_builder.build("_ops.so", extension("_ops", "rt"), link=[new], directory="site/pkg/_cuda121", extra=INCLUDE)
    (elf_builder.root / "gone/libcudart.so.11.0").unlink()
    site = elf_builder.root / "site"
    (site / "pkg/__init__.py").write_text(ALTERNATIVES_INIT)
    make_dist_info(site, "nvidia-cuda-runtime-cu12", "12.1.105", files=("nvidia/cuda_runtime/lib/libcudart.so.12",))
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/_cuda117/_ops.so", "pkg/_cuda121/_ops.so"))
    assert imports(site, "import pkg").returncode == 0
    assert serious(site, tmp_path) == []


PICKING_INIT = """
import ctypes, os, sys
_lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), f"libaddon_py3{sys.version_info.minor}.so"))
"""


def test_a_load_by_a_computed_name_opens_one_of_the_files_it_matches(elf_builder, tmp_path):
    """pkg loads `libaddon_py3{minor}.so` for the running interpreter and ships one per release, the
    old one linking a library that is gone (torch-c-dlpack-ext's addon per torch release): the import
    works, so the alternative no process of this interpreter opens is a warning, not an error."""
    gone = elf_builder.build("libold.so.1", "int old(void) { return 1; }\n", soname="libold.so.1", directory="gone")
    elf_builder.build("libaddon_py30.so", "int old(void);\nint addon(void) { return old(); }\n", link=[gone],
                      directory="site/pkg")
    elf_builder.build(f"libaddon_py3{sys.version_info.minor}.so", "int addon(void) { return 2; }\n", directory="site/pkg")
    (elf_builder.root / "gone/libold.so.1").unlink()
    site = elf_builder.root / "site"
    (site / "pkg/__init__.py").write_text(PICKING_INIT)
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/libaddon_py30.so",
                                              f"pkg/libaddon_py3{sys.version_info.minor}.so"))
    assert imports(site, "import pkg").returncode == 0
    [preload] = model_of(site, ["pkg/__init__.py"]).preloads
    assert (preload.name, preload.reach, preload.computed) == ("libaddon_py3*.so", IMPORT, True)
    assert [(check, severity) for check, severity, _, _ in serious(site, tmp_path)] == [("missing-library", "warning")]


@pytest.mark.network
def test_torch_c_dlpack_ext_loads_one_addon_of_its_twelve(unpacked):
    """The real wheel: core.py loads `libtorch_c_dlpack_addon_torch{major}{minor}-{cuda|cpu}.so` at
    import, the release read from the installed torch; the model keeps both names computed."""
    site = unpacked("torch-c-dlpack-ext==0.1.5")
    files = [str(path.relative_to(site)) for path in site.rglob("*") if path.is_file()]
    model = build_model([str(site / f) for f in files], [str(site)], read_text, ["torch_c_dlpack_ext"])
    assert {(p.name, p.reach, p.computed) for p in model.preloads if p.name.endswith(".so")} == {
        ("libtorch_c_dlpack_addon_torch**-cpu.so", IMPORT, True), ("libtorch_c_dlpack_addon_torch**-cuda.so", IMPORT, True)}


def test_a_guarded_load_of_a_file_not_known_here_keeps_the_extensions_at_its_reach(tmp_path):
    """torchvision loads its `_C` by `torch.ops.load_library(_get_extension_path("_C"))` behind a
    handler: no import names `_C`, but it is loaded as the package imports, so it is `guarded`, not
    `unreached`."""
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg/__init__.py").write_text(
        "import torch\nfrom ._paths import where\ntry:\n    torch.ops.load_library(where('_C'))\nexcept OSError:\n    pass\n")
    (site / "pkg/_C.so").write_text("")
    assert model_of(site, ["pkg/__init__.py", "pkg/_C.so"]).extensions[str(site / "pkg/_C.so")] == ("pkg._C", GUARDED)
    (site / "pkg/__init__.py").write_text("import ctypes\n_self = ctypes.CDLL(None)\n")  # the process's own symbols
    assert model_of(site, ["pkg/__init__.py", "pkg/_C.so"]).extensions[str(site / "pkg/_C.so")] == ("pkg._C", UNREACHED)


# -- a namespace __init__.py two wheels install ---------------------------------------------------------

def _record(site: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    import base64
    import hashlib
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    rows = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
            for path, data in files.items()]
    (info / "RECORD").write_text("\n".join(rows) + "\n")


EXTEND = b"__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n"


@pytest.mark.parametrize("on_disk, severity", [(EXTEND, "warning"), (b"", "warning"), (b"import os\nVALUE = 1\n", "error")])
def test_a_namespace_init_two_wheels_install_is_not_an_error(tmp_path, on_disk, severity):
    """nvidia/__init__.py, empty in one wheel and extend_path in the other: either makes the same
    namespace, so no process breaks (a warning, and no fix that uninstalls a wheel); an __init__.py
    with code of its own stays an error."""
    from cudaresolve.checks import ownership
    from cudaresolve.env.distributions import read_distributions
    from cudaresolve.env.interpreter import target_for_site_packages
    from cudaresolve.env.ownership import shared_files
    from cudaresolve.env.scan import scan_environment

    site = tmp_path / "site"
    (site / "nvidia").mkdir(parents=True)
    (site / "nvidia/__init__.py").write_bytes(on_disk)
    _record(site, "nvidia-a", "1.0", {"nvidia/__init__.py": b""})
    _record(site, "nvidia-b", "1.0", {"nvidia/__init__.py": on_disk if on_disk else EXTEND})
    [shared], _ = shared_files(read_distributions(str(site))[0])
    env = scan_environment(target_for_site_packages(str(site)), facts_for=lambda path: None)
    [finding] = ownership.check_owned_twice(env)
    assert (shared.namespace, finding.severity.value) == (severity == "warning", severity)
    assert (finding.fix is None) == (severity == "warning")


@pytest.mark.parametrize("importer, severity", [(None, "warning"), ("import build_backend\n", "error")])
def test_a_stray_top_level_module_two_wheels_install_is_an_error_only_when_imported(tmp_path, importer, severity):
    """build_backend.py, a build helper flashinfer-python and torch-c-dlpack-ext both install beside
    their own packages: no import the doctor reads names it, so no process loads either owner's bytes
    (a warning); a third package whose import imports it makes it an error."""
    from cudaresolve.checks import ownership
    from cudaresolve.env.interpreter import target_for_site_packages
    from cudaresolve.env.scan import scan_environment

    site = tmp_path / "site"
    for owner in ("a", "b"):
        (site / f"pkg_{owner}").mkdir(parents=True)
        (site / f"pkg_{owner}/__init__.py").write_text("")
        _record(site, f"pkg-{owner}", "1.0", {f"pkg_{owner}/__init__.py": b"", "build_backend.py": owner.encode()})
    (site / "build_backend.py").write_text("b")
    if importer is not None:
        (site / "user").mkdir()
        (site / "user/__init__.py").write_text(importer)
        native = Path(sys.executable).resolve().read_bytes()  # the doctor reads the imports of packages that ship ELF files
        (site / "user/_native.so").write_bytes(native)
        _record(site, "user", "1.0", {"user/__init__.py": importer.encode(), "user/_native.so": native})
    env = scan_environment(target_for_site_packages(str(site)), facts_for=lambda path: None)
    [finding] = ownership.check_owned_twice(env)
    assert finding.severity.value == severity


# -- a real wheel ----------------------------------------------------------------------------------------

@pytest.mark.torch_venv
def test_torchs_row_of_what_its_import_loads_is_what_its_files_say(monkeypatch):
    """torch 2.14.1's preloader row names `on_import` = lib/libtorch_global_deps.so (loaded with
    ctypes by path) and torch/_C.*.so: the model of the installed files finds both on the import's
    path; a module torch imports only from a function (torch.cuda's NVML loader) stays lazy. The
    model is the same when every function is walked (no function left out for want of an `import` line)."""
    from test_torch_family_fix import TORCH
    from wheel_cache import build_venv

    from cudaresolve.env.distributions import read_distributions
    from cudaresolve.env.import_cache import ImportModelCache, read_source
    from cudaresolve.knowledge import components

    python = build_venv([f"torch=={TORCH}"], deps=True) / "bin" / "python"
    [site] = (python.parent.parent / "lib").glob("python3*/site-packages")
    [torch] = [d for d in read_distributions(str(site))[0] if d.name == "torch"]
    model = build_model(torch.files, [str(site)], read_source)
    with monkeypatch.context() as patched:
        patched.setattr(import_model._Visit, "may_import", lambda self, function: True)
        assert build_model(torch.files, [str(site)], read_source) == model
    with tempfile.TemporaryDirectory() as cache_dir:  # kept by content: a second look parses nothing
        ImportModelCache(cache_dir).model(torch.files, [str(site)])
        second = ImportModelCache(cache_dir)
        assert second.model(torch.files, [str(site)]) == model and second.parsed == 0
    preloads = {p.name: p.reach for p in model.preloads}
    assert preloads["libtorch_global_deps.so"] == IMPORT
    assert preloads["libnvidia-ml.so.1"] == LAZY
    [(name, reach)] = [found for path, found in model.extensions.items() if os.path.basename(path).startswith("_C.")]
    assert (name, reach) == ("torch._C", IMPORT)
    row = components.preloader_for("torch", torch.version)
    assert row is not None and row.on_import == ("torch/lib/libtorch_global_deps.so", "torch/_C.*.so")


COMPUTED_PRELOAD_INIT = """
import ctypes, os
_HERE = os.path.dirname(os.path.abspath(__file__))
ctypes.CDLL(os.path.join(_HERE, "lib", "".join(["libdep", ".so", ".1"])))
from . import _core
"""


def test_doctor_import_judges_what_the_import_did(elf_builder, tmp_path, hermetic, capsys):
    """`doctor --import` (env/observe.py, checks/observed.py) runs the import in the target's interpreter:
    a preload by a name the model cannot compute makes a static missing-library error, which the import
    that mapped _core.so turns into an info; without any preload the import fails, an error with the
    target's own words beside the static one."""
    import json
    import venv

    from cudaresolve.cli import main

    site, _ = preloading(elf_builder, "")
    root = tmp_path / "venv"
    venv.create(root, with_pip=False)
    [target] = (root / "lib").glob("python3*/site-packages")
    python = str(root / "bin" / "python")

    def doctor(init: str) -> tuple[int, list[tuple[str, str, str]]]:
        (site / "pkg/__init__.py").write_text(init)
        subprocess.run(["cp", "-a", f"{site}/.", str(target)], check=True)
        code = main(["doctor", "--import", "--json", "--no-judge-fixes", "--python", python, "--driver", "580.65.06", "--gpu", "8.6"])
        report = json.loads(capsys.readouterr().out)
        return code, sorted((f["check"], f["severity"], f["message"]) for f in report["findings"] if f["subject"] == "pkg 1.0")

    code, found = doctor(COMPUTED_PRELOAD_INIT)
    assert code == 0 and [(check, severity) for check, severity, _ in found] == [("missing-library", "info")], found
    code, found = doctor("from . import _core\n")
    assert code == 2
    assert ("import", "error", f"import pkg fails: ImportError: libdep.so.1: {NO_SUCH_FILE}") in found, found
    assert ("missing-library", "error", f"_core.so: libdep.so.1: {NO_SUCH_FILE}") in found
    assert main(["doctor", "--import", "--example"]) == 3


def test_an_import_that_fails_where_its_driver_library_is_absent_is_a_warning(elf_builder, tmp_path, hermetic, capsys):
    """DeepEP's import raises its own words ("the NVIDIA driver does not expose a usable CUDA device")
    on a machine without a driver: its extension links libcuda.so.1 and the import mapped no driver
    library, so the failure may be this machine's, not the judged host's: a warning. A package that
    links no driver library and fails the same way is an error; a module under a namespace package that
    fails in words naming no library, a warning."""
    import json
    import venv

    from cudaresolve.cli import main

    root = tmp_path / "venv"
    venv.create(root, with_pip=False)
    [target] = (root / "lib").glob("python3*/site-packages")
    driver = elf_builder.build("libcuda.so.1", "int cuInit(int f) { return f; }\n", soname="libcuda.so.1", directory="driver")
    raising = "raise ImportError('the NVIDIA driver does not expose a usable CUDA device')\n"

    def severity(linked: list, package: str = "pkg") -> list[str]:
        where = f"{package.replace('/', '-')}-{'linked' if linked else 'plain'}"
        elf_builder.build("_C.so", extension("_C", "cuInit" if linked else ""), link=linked, directory=f"{where}/{package}",
                          extra=INCLUDE)
        site = elf_builder.root / where
        (site / f"{package}/__init__.py").write_text(raising)
        make_dist_info(site, "pkg", "1.0", files=(f"{package}/__init__.py", f"{package}/_C.so"))
        subprocess.run(["cp", "-a", f"{site}/.", str(target)], check=True)
        main(["doctor", "--import", "--json", "--no-judge-fixes", "--python", str(root / "bin" / "python"), "--driver", "580.65.06", "--gpu", "8.6"])
        report = json.loads(capsys.readouterr().out)
        return [f["severity"] for f in report["findings"] if f["check"] == "import"]

    assert severity([driver]) == ["warning"]
    assert severity([]) == ["error"]
    # under a namespace (no ns/__init__.py), ns.sub is imported as a program might: words naming no library prove nothing
    assert severity([], "ns/sub") == ["warning"]


def test_an_observed_report_is_validated_and_its_words_made_one_printable_line(tmp_path, monkeypatch):
    """The child's report is hostile text: only what follows the last marker counts, in its shape;
    an exception's words keep no control character; a child that exits before it reports, prints
    past its bound or outlives its time is an observation that did not happen, with why."""
    from cudaresolve.env import observe

    marker = b"cudaresolve-observed-x:"
    good = b'{"failed": {"pkg": ["OSError", "libx.so.1: \\u001b[31mred\\nnext"]}, "loaded": ["/a/libx.so"]}'
    assert observe._report(b"printed by the import\n" + marker + good + b"\n", marker) == (
        {"pkg": ("OSError", "libx.so.1: \\x1b[31mred\\x0anext")}, ["/a/libx.so"])
    for bad in (b"no marker", marker + good, b"\n" + marker + b"{", b"\n" + marker + b'{"failed": {"pkg": "x"}, "loaded": []}',
                b"\n" + marker + b'{"failed": {}, "loaded": [1]}'):
        assert observe._report(bad, marker) is None
    script = tmp_path / "python"
    monkeypatch.setattr(observe, "TIMEOUT", 1.0)
    for body, why in (("exit 0", "ended before its report"), ("yes | head -c 9000000", "printed more than"),
                      ("sleep 5", "did not end within")):
        script.write_text(f"#!/bin/sh\ncat > /dev/null\n{body}\n")
        script.chmod(0o755)
        seen = observe._observe(str(script), "pkg", ("pkg",), {"PATH": os.environ["PATH"]})
        assert seen.error is not None and why in seen.error and not seen.imported, seen


def test_device_code_only_a_module_the_import_does_not_load_lacks_costs_that_module(elf_builder, tmp_path):
    """pkg's import loads _core (sm_86 code); pkg.hopper, which nothing imports, loads _h100 (sm_90, sm_100).
    On an 8.6 GPU that is a warning naming pkg.hopper, not the package's arch-coverage error; with
    `from . import hopper` in pkg/__init__.py it is the error."""
    from fatbin_bytes import container, cubin, entry

    def with_code(name: str, arch: int, directory: str) -> Path:
        archs = (arch, arch + 10)  # two entries: one alone beside code that runs is a stub, not judged
        blob = container(*(entry(2, a, cubin(a)) for a in archs))
        source = extension(name) + (f'__attribute__((section(".nv_fatbin"), aligned(8), used)) const unsigned char '
                                    f'fatbin[] = {{{", ".join(map(str, blob))}}};\n')
        return elf_builder.build(f"{name}.so", source, directory=directory, extra=INCLUDE)

    with_code("_core", 86, "site/pkg")
    with_code("_h100", 90, "site/pkg/hopper")
    site = elf_builder.root / "site"
    (site / "pkg/__init__.py").write_text("from . import _core\n")
    (site / "pkg/hopper/__init__.py").write_text("from . import _h100\n")
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/_core.so", "pkg/hopper/__init__.py",
                                              "pkg/hopper/_h100.so"))
    assert imports(site, "import pkg, sys; assert 'pkg.hopper' not in sys.modules").returncode == 0

    def arch(run_dir: str) -> list[tuple[str, str]]:
        found = run(site, tmp_path / run_dir).findings
        return [(f.severity, type(f.problem).__name__) for f in found if f.check == "arch-coverage"]

    assert arch("deferred") == [("warning", "OptInUnavailable")]
    (site / "pkg/__init__.py").write_text("from . import _core\nfrom . import hopper\n")
    assert arch("imported") == [("error", "NoDeviceCode")]


def test_a_library_of_arch_specific_code_alone_is_a_feature_of_those_gpus(elf_builder, tmp_path):
    """A library whose device code is only sm_90a and sm_100a SASS (FlashMLA's) is made for those GPUs
    alone: on an 8.6 GPU, a warning naming it; the same library with portable sm_90 SASS is an error."""
    from fatbin_bytes import container, cubin, entry

    def run_with(specific: bool, run_dir: str) -> list[tuple[str, str]]:
        blob = container(*(entry(2, a, cubin(a), flags=0x11 | (0x100000 if specific else 0)) for a in (90, 100)))
        source = extension("_mla") + (f'__attribute__((section(".nv_fatbin"), aligned(8), used)) const unsigned char '
                                      f'fatbin[] = {{{", ".join(map(str, blob))}}};\n')
        elf_builder.build("_mla.so", source, directory=f"{run_dir}/pkg", extra=INCLUDE)
        site = elf_builder.root / run_dir
        (site / "pkg/__init__.py").write_text("from . import _mla\n")
        make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/_mla.so"))
        found = run(site, tmp_path / run_dir).findings
        return [(f.severity, type(f.problem).__name__) for f in found if f.check == "arch-coverage"]

    assert run_with(True, "specific") == [("warning", "OptInUnavailable")]
    assert run_with(False, "portable") == [("error", "NoDeviceCode")]


def test_libraries_an_import_preloads_from_a_list_are_loaded_each_after_what_it_links(elf_builder, tmp_path):
    """pkg's __init__ preloads libz_base.so.1, then liba_top.so.1, which links it with no path (as
    numba-cuda-mlir preloads libMLIRPythonCAPI.so before libMLIRToLLVM70.so): the import works, and
    the doctor loads them in an order that works, though the model reads the names as a set."""
    base = elf_builder.build("libz_base.so.1", "int base(void) { return 1; }\n", soname="libz_base.so.1", directory="site/pkg/lib")
    elf_builder.build("liba_top.so.1", "int base(void);\nint top(void) { return base(); }\n", soname="liba_top.so.1",
                      link=[base], directory="site/pkg/lib")
    site = elf_builder.root / "site"
    (site / "pkg/__init__.py").write_text(
        "import ctypes, os\n_HERE = os.path.dirname(os.path.abspath(__file__))\n"
        "for _name in ['libz_base.so.1', 'liba_top.so.1']:\n    ctypes.CDLL(os.path.join(_HERE, 'lib', _name))\n")
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/lib/libz_base.so.1", "pkg/lib/liba_top.so.1"))
    assert imports(site, "import pkg").returncode == 0
    assert serious(site, tmp_path) == []


GUARDED_EXTENSION_INIT = """
import logging
from . import _new
try:
    from . import _old
except ImportError as exc:
    logging.getLogger("pkg").warning("C++ kernels unavailable: %s", exc)
    _old = None
"""


@pytest.mark.parametrize("old_runtime", [False, True])
def test_a_runtime_major_only_a_guarded_load_needs_is_an_error_only_where_that_load_succeeds(elf_builder, tmp_path,
                                                                                            old_runtime):
    """pkg imports `_new` (libcudart.so.13 of nvidia-cuda-runtime 13) and, behind a handler that goes
    on without it, `_old` (libcudart.so.12; xformers' `_C` beside torch's CUDA 13). Without a CUDA 12
    runtime `_old` cannot load: the process holds one major and what is lost is `pkg._old`, a
    warning. With nvidia-cuda-runtime-cu12 installed the import maps both majors: an error."""
    lib = "site/nvidia/{}/lib"
    new = elf_builder.build("libcudart.so.13", "int rt13(void) { return 13; }\n", soname="libcudart.so.13",
                            directory=lib.format("cu13"))
    old = elf_builder.build("libcudart.so.12", "int rt12(void) { return 12; }\n", soname="libcudart.so.12",
                            directory=lib.format("cuda_runtime"))
    elf_builder.build("_new.so", extension("_new", "rt13"), link=[new], rpath="$ORIGIN/../nvidia/cu13/lib",
                      directory="site/pkg", extra=INCLUDE)
    elf_builder.build("_old.so", extension("_old", "rt12"), link=[old], rpath="$ORIGIN/../nvidia/cuda_runtime/lib",
                      directory="site/pkg", extra=INCLUDE)
    site = elf_builder.root / "site"
    (site / "pkg/__init__.py").write_text(GUARDED_EXTENSION_INIT)
    make_dist_info(site, "nvidia-cuda-runtime", "13.0.96", files=("nvidia/cu13/lib/libcudart.so.13",))
    if old_runtime:
        make_dist_info(site, "nvidia-cuda-runtime-cu12", "12.8.90", files=("nvidia/cuda_runtime/lib/libcudart.so.12",))
    else:
        old.unlink()
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/_new.so", "pkg/_old.so"))
    maps = imports(site, "import pkg; print(pkg._old is None); print(open('/proc/self/maps').read())")
    assert maps.returncode == 0 and maps.stdout.startswith(f"{not old_runtime}\n")
    assert ("libcudart.so.12" in maps.stdout) is old_runtime and "libcudart.so.13" in maps.stdout
    found = [(check, severity, subject, message) for check, severity, subject, message in serious(site, tmp_path)
             if check == "mixed-majors"]
    if old_runtime:
        assert found == [("mixed-majors", "error", "environment",
                          "packages need different CUDA majors (12, 13); two CUDA runtimes in one process do not "
                          "share contexts, memory or streams")]
    else:
        assert [(severity, subject) for _, severity, subject, _ in found] == [("warning", "environment"), ("warning", "pkg 1.0")]
        assert all("pkg._old" in message for *_, message in found)


@pytest.mark.network
def test_xformers_loads_its_extension_at_import_behind_a_handler_that_goes_on(unpacked):
    """The real wheel: `xformers/_cpp_lib.py` calls `_register_extensions()` at module level, which
    loads `_C` by `torch.ops.load_library` inside a `try` whose handler logs and goes on; `import
    xformers` imports `_cpp_lib`. So `_C` is guarded: where it cannot load, the import works without it."""
    site = unpacked("xformers==0.0.35")
    files = [str(path.relative_to(site)) for path in site.rglob("*") if path.is_file()]
    model = build_model([str(site / f) for f in files], [str(site)], read_text, ["xformers"])
    assert model.conclusive
    assert {name: reach for name, reach in model.extensions.values()} == {"xformers._C": GUARDED}


@pytest.mark.parametrize("loads", [False, True])
def test_device_code_of_a_guarded_module_ld_so_refuses_costs_that_module(elf_builder, tmp_path, loads):
    """pkg imports _core (sm_86 code) and, inside a `try` that goes on without it, _h100 (sm_90, sm_100),
    which links libdep.so.1. Where libdep.so.1 is gone the import works without _h100 (xformers' `_C`
    beside torch cu130): on an 8.6 GPU a warning naming pkg._h100; where it loads, the error."""
    from fatbin_bytes import container, cubin, entry

    dep = elf_builder.build("libdep.so.1", "int dep(void) { return 1; }\n", soname="libdep.so.1", directory="site/pkg/lib")
    for name, arch in (("_core", 86), ("_h100", 90)):
        blob = container(*(entry(2, a, cubin(a)) for a in (arch, arch + 10)))
        source = extension(name, "dep" if name == "_h100" else "") + (
            f'__attribute__((section(".nv_fatbin"), aligned(8), used)) const unsigned char '
            f'fatbin[] = {{{", ".join(map(str, blob))}}};\n')
        elf_builder.build(f"{name}.so", source, directory="site/pkg", extra=INCLUDE,
                          link=[dep] if name == "_h100" else [], rpath="$ORIGIN/lib")
    if not loads:
        dep.unlink()
    site = elf_builder.root / "site"
    (site / "pkg/__init__.py").write_text("from . import _core\ntry:\n    from . import _h100\nexcept ImportError:\n    _h100 = None\n")
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/_core.so", "pkg/_h100.so")
                   + (("pkg/lib/libdep.so.1",) if loads else ()))
    assert imports(site, "import pkg; print(pkg._h100 is None)").stdout == f"{not loads}\n"
    found = [(f.severity, type(f.problem).__name__, f.problem) for f in run(site, tmp_path).findings if f.check == "arch-coverage"]
    if loads:
        assert [severity for severity, _, _ in found] == ["error"]
    else:
        assert [(severity, kind, problem.feature) for severity, kind, problem in found] == [
            ("warning", "OptInUnavailable", "pkg._h100")]


OPERATORS_INIT = """
from ._paths import where
from . import _registry
try:
    _registry.load_library(where("_C"))
except OSError:
    pass
"""
OPERATOR_USE = """
@_registry.register_fake("pkg::nms")
def _nms():
    return None
"""
REGISTRY = """
import ctypes
LOADED = []
def load_library(path):
    LOADED.append(ctypes.CDLL(path))
def register_fake(name):
    if not LOADED:
        raise RuntimeError(f"operator {name} does not exist")
    return lambda function: function
"""


@pytest.mark.parametrize("uses_operators", [False, True])
def test_a_guarded_load_whose_operators_the_import_uses_is_needed_at_import(elf_builder, tmp_path, uses_operators):
    """pkg loads its `_C` (which links libgone.so.1, absent) by a path the model cannot name, inside a
    `try` that goes on without it (torchvision 0.28.0 beside a CPU torch). Where the import then
    registers code for an operator of its own namespace (`@register_fake("pkg::nms")`, which needs
    the operator `_C` registers) the import fails: an error. Without that use: an info."""
    gone = elf_builder.build("libgone.so.1", "int gone(void) { return 1; }\n", soname="libgone.so.1", directory="gone")
    elf_builder.build("_C.so", extension("_C", "gone"), link=[gone], directory="site/pkg", extra=INCLUDE)
    (elf_builder.root / "gone/libgone.so.1").unlink()
    site = elf_builder.root / "site"
    (site / "pkg/__init__.py").write_text(OPERATORS_INIT + (OPERATOR_USE if uses_operators else ""))
    (site / "pkg/_registry.py").write_text(REGISTRY)
    (site / "pkg/_paths.py").write_text("import os\ndef where(name):\n    return os.path.join(os.path.dirname(__file__), name + '.so')\n")
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/_registry.py", "pkg/_paths.py", "pkg/_C.so"))
    result = imports(site, "import pkg")
    assert (result.returncode != 0) is uses_operators
    assert ("operator pkg::nms does not exist" in result.stderr) is uses_operators
    found = [(check, severity) for check, severity, _, _ in serious(site, tmp_path)]
    assert found == ([("missing-library", "error")] if uses_operators else [])
    assert model_of(site, ["pkg/__init__.py", "pkg/_registry.py", "pkg/_paths.py", "pkg/_C.so"]).extensions[
        str(site / "pkg/_C.so")] == ("pkg._C", IMPORT if uses_operators else GUARDED)


LOADER = """
import ctypes, os


def _path(name):
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".so")


def load_core():
    for version in (2, 1):
        try:
            ctypes.CDLL(_path(f"libcore{version}"))
            return version
        except OSError:
            pass
    raise RuntimeError("no libcore loads")
"""

ONE_OF_INIT = {
    "raises": "from ._loader import load_core\nVERSION = load_core()\n",
    "goes on": "from ._loader import load_core\ntry:\n    VERSION = load_core()\nexcept RuntimeError:\n    VERSION = None\n",
}


@pytest.mark.parametrize("present, caller", [((1,), "raises"), ((), "raises"), ((), "goes on")])
def test_files_a_loop_tries_in_turn_fail_the_import_only_when_none_loads(elf_builder, tmp_path, present, caller):
    """pkg's import calls `load_core()` of another of its modules, which loads `libcore2.so`, else
    `libcore1.so` (names made by a helper the model cannot compute), and raises when neither loads
    (torchcodec 0.13's FFmpeg loop). Each links its own system library (libgone2.so.1, libgone1.so.1).
    One present: the import works, no finding. None: the import fails, an error naming both.
    None, with the call behind a handler (torchcodec 0.17): the import works, an info."""
    site = elf_builder.root / "site"
    for version in (1, 2):
        gone = elf_builder.build(f"libgone{version}.so.1", "int gone(void) { return 1; }\n", soname=f"libgone{version}.so.1",
                                 directory="system")
        elf_builder.build(f"libcore{version}.so", "int gone(void);\nint core(void) { return gone(); }\n",
                          link=[gone], directory="site/pkg")
        if version not in present:
            gone.unlink()
    (site / "pkg/__init__.py").write_text(ONE_OF_INIT[caller])
    (site / "pkg/_loader.py").write_text(LOADER)
    make_dist_info(site, "pkg", "1.0", files=("pkg/__init__.py", "pkg/_loader.py", "pkg/libcore1.so", "pkg/libcore2.so"))
    system = str(elf_builder.root / "system")
    result = imports(site, "import pkg; print(pkg.VERSION)", {"LD_LIBRARY_PATH": system})
    assert (result.returncode == 0) is (caller == "goes on" or bool(present))
    found = [(check, severity, message) for check, severity, _, message in serious(site, tmp_path, system)]
    if present or caller == "goes on":
        assert found == []
    else:
        assert found == [("missing-library", "error",
                          "its import fails: pkg._loader tries 2 libraries in turn (libcore1.so, libcore2.so) and none "
                          "loads; they need libgone1.so.1, libgone2.so.1, which are not on their search path")]


@pytest.mark.network
def test_torchcodec_needs_one_of_its_ffmpeg_builds_in_0_13_and_goes_on_without_in_0_17(unpacked):
    """The real wheels: both releases' `_core/ops.py` call a loader of `_internally_replaced_utils`
    at import that tries `libtorchcodec_core{N}` for each FFmpeg major in turn, through
    `_get_extension_path`, and raises when none loads. 0.13.0 calls it unguarded (`one-of`: its
    import fails without FFmpeg); 0.17.0 calls it inside `try ... except Exception` (`guarded`)
    and loads its image library unguarded first."""
    reaches = {}
    for release in ("0.13.0", "0.17.0"):
        site = unpacked(f"torchcodec=={release}")
        files = [str(path.relative_to(site)) for path in site.rglob("*") if path.is_file()]
        model = build_model([str(site / f) for f in files], [str(site)], read_text, ["torchcodec"])
        reaches[release] = {preload.name: preload.reach for preload in model.preloads}
    assert reaches["0.13.0"] == {"libtorchcodec_core*.*so*": ONE_OF, "libtorchcodec_custom_ops*.*so*": ONE_OF}
    assert reaches["0.17.0"] == {"libtorchcodec_image.*so*": IMPORT, "libtorchcodec_core*.*so*": GUARDED,
                                 "libtorchcodec_custom_ops*.*so*": GUARDED, "libtorchcodec_heic.*so*": LAZY}


@pytest.mark.network
def test_torchvision_0_28_registers_code_for_its_operators_at_import(unpacked):
    """The real wheel: torchvision/__init__.py imports `extension` (whose `_load_library("_C")` runs
    `torch.ops.load_library` inside `try ... except (ImportError, OSError)`) and then
    `_meta_registrations`, whose module-level `@torch.library.register_fake("torchvision::nms")` needs
    the operator `_C` registers: `_C` is needed at import, not guarded."""
    site = unpacked("torchvision==0.28.0")
    files = [str(path.relative_to(site)) for path in site.rglob("*") if path.is_file()]
    model = build_model([str(site / f) for f in files], [str(site)], read_text, ["torchvision"])
    assert model.extensions[str(site / "torchvision/_C.so")] == ("torchvision._C", IMPORT)
