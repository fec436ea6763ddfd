"""A chosen wheel is judged by its own import model (index/wheel_imports.py, resolve/planned.py).

pkgcore's `__init__.py` loads its own libpkgcore.so by path with ctypes at import, unguarded. In
2.0 that library links libabsent_xyz.so.1, which nothing ships: installed, `import pkgcore` fails
and the doctor says so (missing-library, an error). A plan that chooses 2.0 must say the same: the
plan reads the wheel's Python members for its model, so the library is an import-time load, not an
on-demand plugin (an info) as it is to a plan holding no model of the wheel.
"""

from __future__ import annotations

import io
import os
import shutil
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from fix_steps import offline_pip
from index_server import make_wheel
from packaging.utils import canonicalize_name
from packaging.version import Version
from test_checks_planned import PLANNED, X86_64, dist, on, planned, so
from test_per_release import RecordedIndex, candidate

from cudaresolve.binary.wheel import WheelFacts
from cudaresolve.checks.findings import Check, Severity
from cudaresolve.cli import main
from cudaresolve.commands.diagnosing import examine
from cudaresolve.env.imports import IMPORT, ImportModel, Preload
from cudaresolve.env.interpreter import target_for_python
from cudaresolve.index import wheel_imports
from cudaresolve.index.cache import IndexCache
from cudaresolve.index.http import Http
from cudaresolve.index.pages import ProjectFile, index_files
from cudaresolve.index.wheel_imports import wheel_import_model
from cudaresolve.knowledge import wheel_facts
from cudaresolve.output.findings import shown
from cudaresolve.resolve.planned import planned_environment

TAG = "py3-none-manylinux_2_27_x86_64"
HOST = on("550.144.03", "8.6")
INIT = (b"import ctypes\nimport os\n\n"
        b"_core = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libpkgcore.so'))\n")
ABSENT = "libabsent_xyz.so.1"


def pkgcore_wheel(version: str, library: bytes, **more: bytes) -> tuple[str, bytes]:
    return make_wheel("pkgcore", version, tag=TAG,
                      files={"pkgcore/__init__.py": INIT, "pkgcore/libpkgcore.so": library, **more})


@pytest.fixture(scope="module")
def libraries(tmp_path_factory) -> dict[str, bytes]:
    """libpkgcore.so, gcc-built: "good" links nothing absent, "bad" links libabsent_xyz.so.1."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    from conftest import ElfBuilder

    builder = ElfBuilder(tmp_path_factory.mktemp("pkgcore"))
    absent = builder.build(ABSENT, "int absent_xyz(void) { return 1; }\n", soname=ABSENT, directory="absent")
    bad = builder.build("libpkgcore.so", "int absent_xyz(void);\nint core(void) { return absent_xyz(); }\n",
                        soname="libpkgcore.so", link=[absent], directory="bad")
    good = builder.build("libpkgcore.so", "int core(void) { return 0; }\n", soname="libpkgcore.so", directory="good")
    return {"good": good.read_bytes(), "bad": bad.read_bytes()}


@pytest.fixture(scope="module")
def links(libraries, tmp_path_factory) -> Path:
    """A --find-links directory of pkgcore 1.0 (good) and 2.0 (bad)."""
    found = tmp_path_factory.mktemp("pkgcore-links")
    for version, library in (("1.0", libraries["good"]), ("2.0", libraries["bad"])):
        filename, data = pkgcore_wheel(version, library)
        (found / filename).write_bytes(data)
    return found


def missing(findings) -> list[str]:
    return [shown(f).message for f in findings if f.check == Check.MISSING_LIBRARY and f.severity == Severity.ERROR
            and f.subject.distribution == "pkgcore"]


def test_installed_the_import_time_load_is_an_error_of_the_doctor(links, venv_with_pip, tmp_path):
    """The mechanism as the doctor sees it installed (and as Python fails it)."""
    python = venv_with_pip(tmp_path / "venv") / "bin" / "python"
    offline_pip(python, links, ["install", "--no-deps", "pkgcore==2.0"])
    environ = {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache"), "LD_LIBRARY_PATH": "", "LD_PRELOAD": ""}
    findings = examine(target_for_python(str(python)), HOST, environ).findings
    assert missing(findings) == [f"libpkgcore.so: {ABSENT}: cannot open shared object file: No such file or directory"]


def lock(capsys, links: Path, python: str, out: Path, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["lock", "-q", "--deep", *argv, "--driver", "550.144.03", "--gpu", "8.6", "--python", python,
                 "--no-index", "--find-links", str(links), "-o", str(out)])
    return code, capsys.readouterr().err


@pytest.mark.usefixtures("hermetic")
def test_a_lock_judges_the_chosen_release_by_its_own_import(links, empty_python, tmp_path, capsys):
    """The plan reads 2.0's wheel (--deep: every wheel's binaries) and its Python: the same error, so
    the release is not called fit; asked for without a pin, the lock takes 1.0."""
    code, err = lock(capsys, links, empty_python, tmp_path / "pylock.toml", "pkgcore==2.0")
    assert code == 2, err
    assert f"pkgcore 2.0: missing-library: libpkgcore.so: {ABSENT}: cannot open shared object file" in err
    assert not (tmp_path / "pylock.toml").exists()
    code, err = lock(capsys, links, empty_python, tmp_path / "pylock.toml", "pkgcore")
    assert code == 0, err
    from cudaresolve.lockfile.pylock import read_pylock

    assert [(p.name, str(p.version)) for p in read_pylock(str(tmp_path / "pylock.toml")).packages] == [("pkgcore", "1.0")]


def _model(preload: str, module: str) -> ImportModel:
    return ImportModel(True, {}, (Preload(preload, IMPORT, module),))


def test_a_replaced_distribution_takes_its_model_with_it():
    """Installed: pkg 1.0 (model: loads libold.so), stays 1.0 (its model), gone 1.0 (removed from the
    set, as a fix's uninstall leaves it). Chosen: pkg 2.0, whose wheel's model is its own; new 1.0,
    whose wheel has none. The plan keeps the staying model alone beside pkg 2.0's."""
    installed = replace(planned(dist("pkg", "1.0"), dist("stays", "1.0")),
                        imports={"pkg": _model("libold.so", "pkg"), "stays": _model("libstays.so", "stays"),
                                 "gone": _model("libgone.so", "gone")})
    names = {"pkg": "pkg-2.0-py3-none-manylinux_2_27_x86_64.whl", "new": "new-1.0-py3-none-manylinux_2_27_x86_64.whl"}
    facts = {filename: WheelFacts(filename, (so(f"{filename}!{name}/lib{name}.so", soname=f"lib{name}.so"),))
             for name, filename in names.items()}
    index = RecordedIndex(facts, {names["pkg"]: _model("libpkg.so", "pkg")})
    chosen = [candidate("pkg", "2.0", names["pkg"]), candidate("new", "1.0", names["new"])]
    env = planned_environment(installed, chosen, index, deep=True)
    assert env.imports == {"pkg": _model("libpkg.so", "pkg"), "stays": _model("libstays.so", "stays")}
    assert sorted(index.modelled) == sorted(names.values())
    assert f"{PLANNED}/pkg/libpkg.so" in env.files_by_path
    without = planned_environment(installed, chosen, RecordedIndex(facts), deep=True)
    assert without.imports == {"stays": _model("libstays.so", "stays")}  # no model: none borrowed


def test_a_wheel_the_plan_does_not_read_is_not_fetched_for_its_model():
    """A pure wheel joins by its metadata, a release the table has a row of by that row: neither is
    fetched for its Python (a lock reads no wheel the tables answer for)."""
    row = wheel_facts.find("onnxruntime-gpu", "1.31.1", machine="x86_64")
    assert row is not None
    index = RecordedIndex({})
    chosen = [candidate("pure", "1.0", "pure-1.0-py3-none-any.whl"), candidate("onnxruntime-gpu", "1.31.1", row.filename)]
    env = planned_environment(planned(markers=X86_64), chosen, index)
    assert index.read == [row.filename] and any(elf.owner == "onnxruntime-gpu" for elf in env.elf_files)
    assert index.modelled == [] and env.imports == {}


# -- reading the model from a wheel ---------------------------------------------------------------


def served(server, tmp_path, data: bytes, filename: str) -> ProjectFile:
    server.add(filename, data)
    (file,) = index_files(Http(), IndexCache(str(tmp_path / "pages")), server.url + "/simple", "pkgcore")
    return file


SITE = "/venv/lib/python3.11/site-packages"


def test_the_model_is_read_by_range_from_the_python_members_alone_and_cached(libraries, server, tmp_path):
    """A wheel of 4 MB of data beside the library: its tail and its Python members are fetched, each
    counted against the download budget; the model is the one the doctor builds installed, laid out
    where the plan installs it; a second read fetches nothing; --offline without it: no model."""
    filename, data = pkgcore_wheel("2.0", libraries["bad"], **{"pkgcore/data.bin": os.urandom(4 << 20)})
    file = served(server, tmp_path, data, filename)
    http = Http()
    model = wheel_import_model(http, IndexCache(str(tmp_path / "cache")), file, SITE)
    assert model is not None and model.conclusive
    assert [(p.name, p.reach, p.module) for p in model.preloads] == [("libpkgcore.so", IMPORT, "pkgcore")]
    assert list(model.extensions) == [f"{SITE}/pkgcore/libpkgcore.so"]
    sent = server.sent[f"/files/{filename}"]
    assert sent < 300_000 and http.downloaded == sent, (sent, http.downloaded)
    server.sent.clear()
    assert wheel_import_model(Http(), IndexCache(str(tmp_path / "cache")), file, "/other/site-packages") == replace(
        model, extensions={"/other/site-packages/pkgcore/libpkgcore.so": model.extensions[f"{SITE}/pkgcore/libpkgcore.so"]})
    assert server.sent[f"/files/{filename}"] == 0
    assert wheel_import_model(Http(), IndexCache(str(tmp_path / "empty"), offline=True), file, SITE) is None
    server.ranges = False  # a host that does not do ranges: the wheel is downloaded, the same model
    assert wheel_import_model(Http(), IndexCache(str(tmp_path / "whole")), file, SITE) == model
    assert server.sent[f"/files/{filename}"] >= len(data)


def test_a_wheel_that_is_not_a_zip_or_breaks_a_bound_gives_no_model(libraries, tmp_path, monkeypatch):
    filename, data = pkgcore_wheel("2.0", libraries["bad"])
    local = tmp_path / filename
    local.write_bytes(data)
    file = ProjectFile(filename, local.as_uri(), canonicalize_name("pkgcore"), Version("2.0"), (), None, None, None, None,
                       "find-links")
    cache = IndexCache(str(tmp_path / "cache"))
    assert wheel_import_model(Http(), cache, file, SITE) is not None  # read in place
    monkeypatch.setattr(wheel_imports, "MAX_PYTHON_BYTES", len(INIT) - 1)
    assert wheel_import_model(Http(), cache, file, SITE) is None
    monkeypatch.undo()
    local.write_bytes(data[: len(data) // 2])
    assert wheel_import_model(Http(), cache, file, SITE) is None
    damaged = io.BytesIO()
    with zipfile.ZipFile(damaged, "w") as archive:  # stored, so a flipped byte reaches the CRC check
        archive.writestr("pkgcore/__init__.py", INIT)
    raw = bytearray(damaged.getvalue())
    raw[raw.index(b"ctypes.CDLL")] ^= 1
    local.write_bytes(bytes(raw))
    assert wheel_import_model(Http(), cache, file, SITE) is None


def test_a_member_named_outside_the_wheel_is_not_in_its_model(libraries, tmp_path):
    """`../x_cu12.so` would install outside site-packages: the model names no such path."""
    filename, data = pkgcore_wheel("2.0", libraries["bad"], **{"../x_cu12.so": b"", "../x_cu13.so": b""})
    model = wheel_imports._decoded(wheel_imports.model_of_wheel(io.BytesIO(data), Http().limits), SITE + "/")
    assert model is not None and [p.name for p in model.preloads] == ["libpkgcore.so"]
    assert list(model.extensions) == [f"{SITE}/pkgcore/libpkgcore.so"] and model.alternatives == {}


def test_mutated_wheels_and_planted_cache_entries_give_a_model_or_none_never_an_error(libraries, tmp_path):
    """A fuzz case of the reader: bytes of the wheel flipped, cut or repeated (seeded), and garbage in
    its cache entry; each read ends in a model or None, and a garbage entry is dropped and read again."""
    import random

    _, data = pkgcore_wheel("2.0", libraries["bad"])
    rng = random.Random(20261207)
    for _ in range(200):
        raw = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(raw))
            raw[at] = rng.randrange(256)
        if rng.random() < 0.3:
            raw = raw[: rng.randrange(len(raw))] + raw[rng.randrange(len(raw)):]
        model = wheel_imports._decoded(wheel_imports.model_of_wheel(io.BytesIO(bytes(raw)), Http().limits), SITE + "/")
        assert model is None or isinstance(model, ImportModel)
    filename = "pkgcore-2.0-py3-none-any.whl"
    local = tmp_path / filename
    local.write_bytes(data)
    file = ProjectFile(filename, "https://example.invalid/" + filename, canonicalize_name("pkgcore"), Version("2.0"),
                       (("sha256", "0" * 64),), None, None, None, None, "index")
    assert file.sha256 == "0" * 64
    cache = IndexCache(str(tmp_path / "cache"), offline=True)  # nothing to fetch: the entry is all it has
    for planted in (b"", b"garbage", wheel_imports.HEADER + b"\x80\x04not a pickle", wheel_imports.HEADER):
        cache.store_blob(wheel_imports.KIND, file.sha256, planted)
        assert wheel_import_model(Http(), cache, file, SITE) is None
        assert cache.blob(wheel_imports.KIND, file.sha256, 1 << 20) is None  # dropped, not read again
