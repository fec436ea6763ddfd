"""The survey's oracles: what an import really loads, what ld.so and cuobjdump say, and the labelling
rules that compare each doctor finding with them (not part of CI; used by scripts/survey.py).

Every rule is one function per check; a finding no rule decides is "needs-a-look".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

CUDA_LIB = re.compile(r"/lib(cudart|cublas|cublasLt|nvrtc|cudnn\w*|cufft|curand|cusolver|cusparse|nccl|nvJitLink|"
                      r"cupti|cusparseLt|nvshmem_host|cufile)\.so\.(\d+)")
# The oldest driver each CUDA major runs on (../shared/reference/cuda-facts.md, NVIDIA's table:
# 11.x >= 450.80.02, 12.x >= 525.60.13, 13.x >= 580.65.06); minor releases run there by minor-version compatibility.
MAJOR_FLOOR = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580, 65, 6)}
TIMEOUT = 120

# Run in the stack's interpreter: the top-level modules of each distribution, from top_level.txt or RECORD.
MODULES = r"""
import importlib.metadata as m, json, sys
out = {}
for d in m.distributions():
    name = d.metadata['Name']
    top = (d.read_text('top_level.txt') or '').split()
    if not top:
        for f in d.files or ():
            parts = f.parts
            if len(parts) > 1 and parts[1] == '__init__.py' or len(parts) == 1 and (parts[0].endswith('.py') or '.cpython-' in parts[0] or parts[0].endswith('.abi3.so')):
                top.append(parts[0].split('.')[0])
    native = any(str(f).endswith('.so') or '.so.' in str(f) for f in d.files or ())
    out[name] = {'modules': sorted({t for t in top if t and not t.startswith('_') and t.isidentifier()}), 'native': native,
                 'version': d.version}
print(json.dumps(out))
"""
IMPORT = ("import sys, importlib, traceback\nname = sys.argv[1]\ntry:\n    importlib.import_module(name)\n    ok = 'OK'\n"
          "except BaseException as exc:\n    ok = 'FAIL ' + type(exc).__name__ + ': ' + str(exc).replace(chr(10), ' ')[:400]\n"
          "print(ok)\nprint(open('/proc/self/maps').read())\n")


# Run in the stack's interpreter: import the module, make its preload call (when named), then load a file.
LOAD_AFTER = ("import ctypes, importlib, sys\nmodule, call, path = sys.argv[1:4]\nimported = importlib.import_module(module)\n"
              "if call:\n    getattr(imported, call)()\ntry:\n    ctypes.CDLL(path)\n    print('OK')\n"
              "except OSError as exc:\n    print('FAIL ' + str(exc).replace(chr(10), ' ')[:400])\n")


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH")}


def modules_of(python: str) -> dict:
    proc = subprocess.run([python, "-I", "-c", MODULES], capture_output=True, text=True, timeout=TIMEOUT, env=clean_env())
    return json.loads(proc.stdout)


def import_module(python: str, module: str) -> dict:
    """The import of `module` in a fresh isolated child: ok or the exception, and the shared objects it mapped."""
    try:
        proc = subprocess.run([python, "-I", "-c", IMPORT, module], capture_output=True, text=True, timeout=TIMEOUT,
                              env=clean_env())
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {TIMEOUT} s", "loaded": []}
    lines = proc.stdout.splitlines()
    if not lines:
        return {"ok": False, "error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}", "loaded": []}
    loaded = sorted({line.split()[-1] for line in lines[1:] if ".so" in line and line.split()[-1].startswith("/")})
    return {"ok": lines[0] == "OK", "error": None if lines[0] == "OK" else lines[0][5:], "loaded": loaded}


def preload_call(python: str, module: str) -> str | None:
    """The function the package's own top-level module defines to preload its libraries for a program
    to call (onnxruntime's `preload_dlls`): public, "preload" in its name, every argument defaulted,
    read from the file with `ast`."""
    code = ("import ast, importlib.util, json, sys\nspec = importlib.util.find_spec(sys.argv[1])\nfound = None\n"
            "if spec and spec.origin and spec.origin.endswith('.py'):\n"
            "    for node in ast.parse(open(spec.origin).read()).body:\n"
            "        a = getattr(node, 'args', None)\n"
            "        if isinstance(node, ast.FunctionDef) and 'preload' in node.name and not node.name.startswith('_') "
            "and len(a.defaults) == len(a.posonlyargs + a.args) and all(d is not None for d in a.kw_defaults):\n"
            "            found = node.name\n            break\nprint(json.dumps(found))\n")
    proc = subprocess.run([python, "-I", "-c", code, module], capture_output=True, text=True, timeout=TIMEOUT, env=clean_env())
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else None


def load_after(python: str, module: str, call: str | None, path: str) -> str | None:
    """None when `path` loads in a process that imported `module` and made its preload `call`; else
    what the loader said (or why the child failed before the load)."""
    try:
        proc = subprocess.run([python, "-I", "-c", LOAD_AFTER, module, call or "", path], capture_output=True, text=True,
                              timeout=TIMEOUT, env=clean_env())
    except subprocess.TimeoutExpired:
        return f"timed out after {TIMEOUT} s"
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    if last == "OK":
        return None
    return last[5:] if last.startswith("FAIL ") else f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"


NO_GPU = re.compile(r"libcuda\.so|libnvidia-[a-z]+\.so|NVIDIA driver|CUDA device|no CUDA GPUs|cudaGetDeviceCount|"
                    r"CUDA driver|Found no NVIDIA", re.I)
# torch's operator registry refusing an extension's operator: the extension's library did not load
NATIVE_OP = re.compile(r"operator \S+::\S+ does not exist")
DRIVER_LIBRARIES = {"libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1"}


def failure_kind(error: str | None, library_dirs: list[str]) -> str | None:
    """None for a working import; "no-gpu" when it fails only for want of a driver or GPU (this machine
    has none, so it proves nothing), "native" when a shared object cannot load, else "python"."""
    if error is None:
        return None
    if NO_GPU.search(error):
        return "no-gpu"
    named = [p for p in re.findall(r"(/\S+?\.so(?:\.\d+)*)\b", error) if os.path.isfile(p)]
    if named:
        missing = set().union(*(ldd(p, library_dirs)["not_found"] for p in named))
        return "no-gpu" if missing and missing <= DRIVER_LIBRARIES else "native"
    if ".so" in error or "undefined symbol" in error or "OSError" in error or NATIVE_OP.search(error):
        return "native"
    return "python"


def ldd(path: str, library_dirs: list[str]) -> dict:
    """`ldd -r` of `path` with the import's library directories on LD_LIBRARY_PATH: what is not found
    and which symbols stay undefined."""
    env = clean_env() | {"LD_LIBRARY_PATH": ":".join(library_dirs)}
    try:
        proc = subprocess.run(["ldd", "-r", path], capture_output=True, text=True, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        return {"not_found": [], "undefined": [], "error": "timed out"}
    text = proc.stdout + proc.stderr
    not_found = sorted({line.split()[0] for line in text.splitlines() if "not found" in line and "=>" in line})
    undefined = [line.strip() for line in text.splitlines() if line.strip().startswith("undefined symbol")]
    undefined = [u for u in undefined if "(" + path + ")" in u or path in u]
    return {"not_found": not_found, "undefined": undefined[:20], "error": None}


def readelf_needed(paths: list[str]) -> set[str]:
    """DT_NEEDED of `paths`, read by readelf -d."""
    needed: set[str] = set()
    for path in paths[:40]:
        if not os.path.isfile(path):
            continue
        proc = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, timeout=TIMEOUT)
        needed |= set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", proc.stdout))
    return needed


def device_code(cuobjdump: str, path: str, cache: dict) -> dict:
    """The SASS arches and PTX targets cuobjdump lists for `path` (cached by inode: hard links share it)."""
    key = str(os.stat(path).st_ino)
    if key in cache:
        return cache[key]
    try:
        proc = subprocess.run([cuobjdump, "--list-elf", "--list-ptx", path], capture_output=True, text=True, timeout=300)
        text = proc.stdout + proc.stderr
        result = {"sass": sorted(set(re.findall(r"\.sm_(\d+[a-z]?)\.", text))),
                  "ptx": sorted(set(re.findall(r"\.sm_(\d+[a-z]?)\.ptx", text) + re.findall(r"compute_(\d+[a-z]?)", text))),
                  "error": None if proc.returncode == 0 or "sm_" in text else text.strip()[-200:]}
        result["sass"] = [s for s in result["sass"] if s not in result["ptx"] or f".sm_{s}.cubin" in text]
    except subprocess.TimeoutExpired:
        result = {"sass": [], "ptx": [], "error": "timed out"}
    cache[key] = result
    return result


def runs_on(code: dict, cc: str) -> bool:
    """SASS of the same major and a minor at most the GPU's, or PTX of a target at most the GPU's."""
    major, minor = (int(x) for x in cc.split("."))
    for arch in code["sass"]:
        digits = re.match(r"(\d+)", arch).group(1)
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        if arch.endswith(("a", "f")):
            if (a_major, a_minor) == (major, minor):
                return True
            continue
        if a_major == major and a_minor <= minor:
            return True
    for arch in code["ptx"]:
        digits = re.match(r"(\d+)", arch).group(1)
        if not arch.endswith(("a", "f")) and (int(digits[:-1]), int(digits[-1])) <= (major, minor):
            return True
    return False


def driver_runs(driver: str, major: int) -> bool:
    return tuple(int(x) for x in driver.split(".")) >= MAJOR_FLOOR.get(major, (0,))


def majors_loaded(loaded: list[str]) -> dict[str, set[int]]:
    """CUDA library family -> the majors of it the process mapped."""
    found: dict[str, set[int]] = {}
    for path in loaded:
        match = CUDA_LIB.search(path)
        if match:
            found.setdefault(match.group(1), set()).add(int(match.group(2)))
    return found


def paths_of(finding: dict) -> list[str]:
    """The files a finding names (its problem and facts), existing ones only."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("path", "consumer", "file") and isinstance(item, str) and item.startswith("/"):
                    found.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(finding.get("problem"))
    walk(finding.get("facts"))
    return [p for p in dict.fromkeys(found) if os.path.isfile(p)]


class Judge:
    """Labels one stack's findings for one host against its import records and the binary oracles."""

    def __init__(self, imports: dict, cuobjdump: str, code_cache: dict, objects: dict[str, list[str]],
                 python: str | None = None) -> None:
        self.python = python  # the stack's interpreter, for the load after a preload call; None: not run
        self.unloadable: dict[str, str] = {}  # file -> the loader's words, after the package's own preload call
        self.objects = objects  # distribution -> its ELF files (the doctor's list of them; read again by readelf)
        self.imports = imports  # distribution -> {module: {"ok", "error", "loaded"}}
        everywhere = sorted({str(Path(p).parent) for rs in imports.values() for r in rs.values() for p in r["loaded"]})
        self.loaded = {os.path.realpath(p) for rs in imports.values() for r in rs.values() for p in r["loaded"]}
        for records in imports.values():
            for record in records.values():
                record.setdefault("kind", failure_kind(record["error"], everywhere))
        self.cuobjdump = cuobjdump
        self.code_cache = code_cache

    def of(self, distribution: str | None) -> list[dict]:
        return list(self.imports.get(distribution or "", {}).values())

    def library_dirs(self, distribution: str | None) -> list[str]:
        dirs = {str(Path(p).parent) for record in self.of(distribution) for p in record["loaded"]}
        if not dirs:
            dirs = {str(Path(p).parent) for records in self.imports.values() for r in records.values() for p in r["loaded"]}
        return sorted(dirs)

    def label(self, finding: dict, driver: str, cc: str) -> tuple[str, str]:
        rule = getattr(self, "_" + finding["check"].replace("-", "_"), None)
        if rule is None:
            return "needs-a-look", "no oracle rule for this check"
        return rule(finding, driver, cc)

    def _import_failed(self, distribution: str | None) -> str | None:
        """The error of a failed import that proves something (not one for want of a GPU)."""
        for record in self.of(distribution):
            if record["kind"] == "native":
                return record["error"]
        return None

    def is_loaded(self, path: str) -> bool:
        return os.path.realpath(path) in self.loaded

    def _missing_library(self, finding: dict, driver: str, cc: str) -> tuple[str, str]:
        dist = finding["about"]["distribution"]
        failed = self._import_failed(dist)
        if failed and (".so" in failed or NATIVE_OP.search(failed)):  # torch's words for an extension that did not load
            return "right", f"import fails: {failed[:160]}"
        files = paths_of(finding)
        loaded = [f for f in files if self.is_loaded(f)]
        if loaded:
            return "wrong", f"the import loads {Path(loaded[0]).name} (its needs were found)"
        dirs = self.library_dirs(dist)
        missing = {f: ldd(f, dirs)["not_found"] for f in files[:8]}
        named = [f"{Path(f).name}: {', '.join(n)}" for f, n in missing.items() if n]
        after = self._after_preload_call(dist, [f for f, n in missing.items() if n], finding["severity"] == "error")
        if after is not None:
            return after
        if named and self.of(dist):
            return "needs-a-look", "not loaded at import; ldd -r with the import's dirs: not found " + "; ".join(named)[:160]
        if named:
            return "right", "ldd -r with the import's dirs: not found " + "; ".join(named)[:200]
        if files and self.of(dist):
            return "wrong", f"import ok; ldd -r of {len(files)} named file(s) with the import's dirs finds every library"
        return "needs-a-look", "no file to test and no import record"

    def _after_preload_call(self, dist: str | None, files: list[str], error: bool) -> tuple[str, str] | None:
        """Each named file loaded in a process that imported the package and made its own preload call
        (where its files define one): right when ld.so refuses one for a library other than the
        driver's (an error's file is then kept in `unloadable`), wrong when each loads; None when not
        run or when only the driver is missing."""
        modules = [m for m, r in self.imports.get(dist or "", {}).items() if r["ok"]]
        if self.python is None or not modules or not files:
            return None
        call = preload_call(self.python, modules[0])
        how = f"after import {modules[0]}" + (f" and {modules[0]}.{call}()" if call else "")
        for path in files[:4]:
            refused = load_after(self.python, modules[0], call, path)
            if refused is not None and failure_kind(refused, self.library_dirs(dist)) == "native":
                if error:
                    self.unloadable[path] = refused
                return "right", f"{how}: {Path(path).name} does not load: {refused[:160]}"
            if refused is not None:
                return None
        return "wrong", f"{how}: each named file loads"

    def _symbol_skew(self, finding: dict, driver: str, cc: str) -> tuple[str, str]:
        dist = finding["about"]["distribution"]
        failed = self._import_failed(dist)
        if failed and "symbol" in failed:
            return "right", f"import fails: {failed[:160]}"
        problem = finding.get("problem") or {}
        consumer = problem.get("consumer")
        symbols = [s for s in problem.get("symbols", []) if s != "..."] or re.findall(r"undefined symbol: (\S+?),?\s", finding["message"] + " ")
        if consumer and os.path.isfile(consumer):
            result = ldd(consumer, self.library_dirs(dist))
            hits = [u for u in result["undefined"] if any(s in u for s in symbols)]
            if not self.is_loaded(consumer) and self.of(dist):
                return "needs-a-look", f"{Path(consumer).name} is not loaded at import" + (" (ldd -r: undefined)" if hits else "")
            if hits:
                return "right", "ldd -r: " + hits[0][:160]
            return "wrong", f"ldd -r of {Path(consumer).name} with the import's dirs: the symbols are defined"
        return "needs-a-look", "no consumer file"

    def _torch_abi(self, finding: dict, driver: str, cc: str) -> tuple[str, str]:
        dist = finding["about"]["distribution"]
        failed = self._import_failed(dist)
        if failed:
            return "right", f"import fails: {failed[:160]}"
        files = paths_of(finding)
        if self.of(dist) and (not files or any(self.is_loaded(f) for f in files)):
            return "wrong", "the import of the extension's package loads its files and succeeds"
        if self.of(dist):
            return "needs-a-look", "the import succeeds without loading the named files"
        return "needs-a-look", "no import record"

    _plugin_host = _torch_abi

    def _driver_floor(self, finding: dict, driver: str, cc: str) -> tuple[str, str]:
        dist = finding["about"]["distribution"]
        majors = majors_loaded([p for r in self.of(dist) for p in r["loaded"]])
        cudart = majors.get("cudart") or set().union(*majors.values()) if majors else set()
        if finding["severity"] == "warning":
            return "needs-a-look", "minor-version compatibility: not an oracle question"
        if not cudart:
            files = paths_of(finding) or self.objects.get(dist or "", [])
            needed = readelf_needed(files) | {Path(f).name for f in files if Path(f).name.startswith("libcudart.so.")}
            linked = {int(m.group(1)) for n in needed if (m := re.match(r"libcudart\.so\.(\d+)", n))}
            below = [m for m in linked if not driver_runs(driver, m)]
            if below:
                return "right", f"readelf: its files need (or are) libcudart.so.{below[0]}; driver {driver} < its floor"
            return "needs-a-look", "no import of it loads a CUDA runtime, and none of its files links or is one"
        below = [m for m in cudart if not driver_runs(driver, m)]
        if below:
            return "right", f"the import loads CUDA {sorted(cudart)} runtime(s); driver {driver} < the CUDA {below[0]}.x floor"
        return "wrong", f"the import loads CUDA {sorted(cudart)} libraries; driver {driver} runs them (table floor)"

    def _arch_coverage(self, finding: dict, driver: str, cc: str) -> tuple[str, str]:
        if not os.path.exists(self.cuobjdump):
            return "needs-a-look", "no cuobjdump"
        files = paths_of(finding)
        if not files:
            return "needs-a-look", "no file named"
        results = {f: device_code(self.cuobjdump, f, self.code_cache) for f in files[:6]}
        lacking = [f for f, code in results.items() if not code["error"] and (code["sass"] or code["ptx"]) and not runs_on(code, cc)]
        running = [f for f, code in results.items() if not code["error"] and runs_on(code, cc)]
        if lacking and not running and self.loaded and not any(self.is_loaded(f) for f in lacking):
            return "needs-a-look", f"cuobjdump: {Path(lacking[0]).name} has no code for {cc}, but no import loads it"
        if lacking and not running:
            code = results[lacking[0]]
            return "right", f"cuobjdump {Path(lacking[0]).name}: sm {','.join(code['sass'])[:80]} ptx {','.join(code['ptx'])[:40]}: none for {cc}"
        if running and not lacking:
            return "wrong", f"cuobjdump: {Path(running[0]).name} has code that runs on {cc}"
        return "needs-a-look", "cuobjdump read no device code, or the files disagree"

    def _mixed_majors(self, finding: dict, driver: str, cc: str) -> tuple[str, str]:
        dist = finding["about"]["distribution"]
        records = self.of(dist) if dist else [r for rs in self.imports.values() for r in rs.values()]
        for record in records:
            mixed = {f: m for f, m in majors_loaded(record["loaded"]).items() if len(m) > 1}
            if mixed:
                return "right", f"one import maps several majors: {mixed}"
        failed = self._import_failed(dist)
        if failed:
            return "right", f"import fails: {failed[:160]}"
        return "needs-a-look", "no single import maps two majors"

    def _duplicate_library(self, finding: dict, driver: str, cc: str) -> tuple[str, str]:
        soname = finding["about"].get("file") or finding["subject"]
        for records in self.imports.values():
            for record in records.values():
                copies = {p for p in record["loaded"] if Path(p).name == soname}
                if len(copies) > 1:
                    return "right", f"one import maps {len(copies)} copies of {soname}"
        return "needs-a-look", "no single import maps two copies"


def healthy(imports: dict, code: dict[str, dict], driver: str, cc: str, files: list[str],
            unloadable: dict[str, str] | None = None) -> tuple[bool, str]:
    """A stack is healthy on a host when no import fails to load a shared object (one failing only for
    want of a GPU, or at Python level, is not counted), no library an error names fails to load after
    the import and the package's own preload call (`unloadable`: onnxruntime-gpu's CUDA provider),
    each CUDA library major in `files` (what the imports mapped; for a stack nothing imports, every
    library) is one the driver runs (table floor), and each of them with device code has some for the GPU
    (one SASS entry and no PTX is a stub cuobjdump lists, not the file's kernels: it proves nothing)."""
    for dist, records in imports.items():
        for module, record in records.items():
            if record.get("kind") == "native":
                return False, f"import {module} ({dist}) fails"
    for path, error in (unloadable or {}).items():
        return False, f"{Path(path).name} does not load after its package's preload call: {error[:120]}"
    for family, majors in majors_loaded(files).items():
        for major in majors:
            if not driver_runs(driver, major):
                return False, f"{family} {major} is loaded; driver {driver} is below the CUDA {major} floor"
    for path in files:
        found = code.get(path)
        stub = found and len(found["sass"]) == 1 and not found["ptx"]  # cuobjdump sees one sm_75 entry of cuFFT 12: not its kernels
        if found and (found["sass"] or found["ptx"]) and not stub and not runs_on(found, cc):
            return False, f"{Path(path).name} has no device code for {cc}"
    return True, "imports succeed; runtimes and device code fit"
