"""Findings in words: the subject, one renderer per problem type and per evidence type, and a
finding's JSON (today's text keys and the typed fields they are made from).

`shown(finding)` gives the text a report prints; `finding_dict` adds, beside the text, `about`
(the subject's fields), `problem`, `facts` (the evidence) and `remedy` (the fix), each a JSON object
whose `type` names the dataclass (docs/doctor.md).

May import: checks/ (the finding types; the judge is imported with them, but never called),
output/fixes.py, output/verdicts.py (a verdict's words) and the value types; never the doctor's edge.
"""

from __future__ import annotations

import dataclasses
import os
import re
from enum import Enum
from typing import Any, Callable, Iterable, NamedTuple, Optional

from cudaresolve.checks import evidence as e
from cudaresolve.checks import problems as p
from cudaresolve.checks.findings import SEVERITIES, Finding
from cudaresolve.checks.subjects import Subject
from cudaresolve.compat import Verdict
from cudaresolve.output.fixes import render_fix
from cudaresolve.output.inspect import skipped_because
from cudaresolve.output.verdicts import gpus, words

UNOWNED = "(unowned files)"  # what findings call files no distribution's RECORD lists
SEVERITY_ORDER = tuple(severity.value for severity in SEVERITIES)


class FindingText(NamedTuple):
    """A finding as a report words it."""

    check: str
    severity: str
    subject: str
    message: str
    evidence: tuple[str, ...] = ()
    fix: Optional[str] = None


def shown(finding: Finding) -> FindingText:
    return FindingText(
        finding.check.value, finding.severity.value, render_subject(finding.subject), render_problem(finding.problem),
        tuple(render_evidence(item) for item in finding.evidence),
        render_fix(finding.fix) if finding.fix is not None else None,
    )


def report_order(text: FindingText) -> tuple[int, str, str, str]:
    """Errors first, then warnings, then info; by check, subject and message within a severity."""
    return (SEVERITY_ORDER.index(text.severity), text.check, text.subject, text.message)


def in_report_order(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda finding: report_order(shown(finding)))


def finding_dict(finding: Finding) -> dict[str, Any]:
    text = shown(finding)
    return {
        **text._asdict(),
        "evidence": list(text.evidence),
        "about": _plain(finding.subject, typed=False),
        "problem": _plain(finding.problem),
        "facts": [_plain(item) for item in finding.evidence],
        "remedy": _plain(finding.fix) if finding.fix is not None else None,
    }


def _plain(value: Any, typed: bool = True) -> Any:
    """A finding's value as JSON: a dataclass as an object with its `type` (kebab-case class name)
    and fields, a tuple as a list, a value type (versions, compute capabilities), a requirement or a
    version as its text, an enum as its value."""
    if hasattr(type(value), "parse"):  # CudaVersion, DriverRelease, ComputeCapability: their one text
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
        return {"type": kebab(type(value).__name__), **fields} if typed else fields
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    if isinstance(value, Enum):
        return value.value
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


# -- subjects -------------------------------------------------------------------------------------


def render_subject(subject: Subject) -> str:
    if subject.distribution is not None:
        if subject.conda:
            return f"{subject.distribution} {subject.conda_version} (conda)"
        return subject.distribution if subject.version is None else f"{subject.distribution} {subject.version}"
    if subject.file is not None:
        return subject.file
    if subject.owners and not subject.libraries:
        return f"files of {', '.join(owner or UNOWNED for owner in subject.owners)}"
    if subject.libraries:
        return f"{len(subject.libraries)} libraries of {', '.join(owner or UNOWNED for owner in subject.owners)}"
    if subject.scope is not None:
        return subject.scope.value
    return UNOWNED


# -- problems -------------------------------------------------------------------------------------


def render_problem(problem: p.Problem) -> str:
    return _PROBLEMS[type(problem)](problem)


def _name(path: str) -> str:
    return os.path.basename(path)


def _is_are(items: tuple[object, ...]) -> str:
    return "is" if len(items) == 1 else "are each"


def _owner(owner: p.Owner) -> str:
    return _owned_by(owner.name, owner.conda)


def _owned_by(name: Optional[str], conda: bool) -> str:
    return f"{name} (conda)" if conda else name or UNOWNED


def _found_only_after_call(problem: p.FoundOnlyAfterCall) -> str:
    without = f": without it the {problem.feature} does not load" if problem.feature else ""
    return (f"{_name(problem.consumer)} finds {', '.join(problem.libraries)} only after the program calls "
            f"{problem.module}.{problem.function}(){without}")


def _mixed_majors(problem: p.MixedMajors) -> str:
    majors = ', '.join(map(str, problem.majors))
    if problem.later:
        return (f"packages need different CUDA majors ({majors}), but the import loads one; only features it does not "
                f"load need another: {'; '.join(problem.later)} (they fail, or bring a second CUDA runtime into the process)")
    return f"packages need different CUDA majors ({majors}); two CUDA runtimes in one process do not share contexts, memory or streams"


def _no_alternative_loads(problem: p.NoAlternativeLoads) -> str:
    return (f"its import fails: {' and '.join(problem.modules)} tries {len(problem.files)} libraries in turn "
            f"({', '.join(problem.files)}) and none loads; they need {', '.join(problem.libraries)}, "
            "which are not on their search path")


def _optional_features(problem: p.OptionalFeaturesMissing) -> str:
    plural = "s" if len(problem.features) > 1 else ""
    return (f"optional feature{plural} unavailable: {'; '.join(problem.features)} "
            f"({', '.join(problem.libraries)} not installed)")


def _plugin_libraries(problem: p.PluginLibrariesMissing) -> str:
    count = len(problem.plugins)
    return (("1 plugin library loads only on demand and needs" if count == 1
             else f"{count} plugin libraries load only on demand and need")
            + f" libraries that are not on their search path ({', '.join(problem.libraries)}); the features they "
            "provide are unavailable here")


_SHADOWING_STEPS = {
    "LD_LIBRARY_PATH": "LD_LIBRARY_PATH",
    "ld.so.cache": "the system's ld.so.cache",
    "default dir": "the system's default directory",
    "already loaded": "a copy another library of the package loaded first",
}


def _shadowed(problem: p.Shadowed) -> str:
    if problem.step == "rpath":
        how = f"the RPATH of {problem.rpath_of}"
    elif problem.step == "runpath":
        how = f"the RUNPATH of {_name(problem.consumer)}"
    else:
        how = _SHADOWING_STEPS.get(problem.step, f"the name {problem.soname}")
    conda = f" (from {render_subject(problem.chosen_from)})" if problem.chosen_from else ""
    return (f"{how} makes the loader pick {problem.chosen}{conda} for {_name(problem.consumer)}, not the environment's "
            f"copy from {', '.join(problem.owners) or 'an unowned file'}")


def _duplicate_builds(problem: p.DuplicateBuilds) -> str:
    return (f"{', '.join(problem.libraries)} {_is_are(problem.libraries)} loaded from different builds for different "
            f"consumers ({', '.join(map(_owner, problem.owners))}): in one process the first copy loaded serves every "
            "consumer")


def _private_copies(problem: p.PrivateCopies) -> str:
    others = ("private copies their package loads by path" if not any(o.conda for o in problem.owners)
              else "private copies or a conda package's, which no package judged here loads")
    return (f"{', '.join(problem.libraries)} {_is_are(problem.libraries)} installed by {len(problem.owners)} "
            f"distributions ({', '.join(map(_owner, problem.owners))}); at most one copy is found by the loader, "
            f"the others are {others}")


def _no_device_code(problem: p.NoDeviceCode) -> str:
    return f"{words(problem)}: \"no kernel image is available for execution on the device\""


COMPILERS = {"nvrtc": "NVRTC", "nvvm": "NVVM", "nvjitlink": "nvJitLink"}


def _compiler_cannot_target(problem: p.CompilerCannotTargetGpu) -> str:
    verb = "links" if problem.kind == "nvjitlink" else "compiles"
    return (f"{problem.consumer} {problem.consumer_version} {verb} its kernels at run time with "
            f"{COMPILERS[problem.kind]} {problem.release}, which has no target for compute capability {problem.cc} "
            f"({gpus(problem.gpus)}): it targets {problem.lowest} to {problem.highest}")


def _compiler_ptx_too_new(problem: p.CompilerPtxTooNew) -> str:
    driver = f"driver {problem.driver}" if problem.driver else "the driver"
    cuda = f" (CUDA {problem.driver_cuda})" if problem.driver_cuda else ""
    return (f"{problem.consumer} {problem.consumer_version} hands the driver PTX from {COMPILERS[problem.kind]} "
            f"{problem.release}: PTX ISA {problem.ptx_isa}, newer than the {problem.driver_ptx_isa} {driver}{cuda} "
            "loads (\"CUDA_ERROR_UNSUPPORTED_PTX_VERSION\" at the first launch; minor-version compatibility does "
            "not cover PTX)")


def _linker_cannot_read(problem: p.LinkerCannotRead) -> str:
    what = {"ptx": f"PTX ISA {problem.ptx_isa} (it links up to {problem.linker_ptx_isa}: \"NVJITLINK_ERROR_PTX_COMPILE\")",
            "ltoir": f"LTO-IR of CUDA {problem.cuda} (it reads LTO-IR up to its own CUDA {problem.linker_cuda}: "
                     "\"may need newer version of nvJitLink library\")"}
    return (f"{problem.consumer} {problem.consumer_version} links what {COMPILERS[problem.kind]} {problem.release} "
            f"writes with nvJitLink {problem.linker_release}, which cannot read it: "
            f"{' and '.join(what[kind] for kind in problem.inputs)}; the link fails at its first kernel")


def _dlsym_missing(problem: p.DlsymFunctionsMissing) -> str:
    cost = "it falls back to another path" if problem.fallback else "the first call fails"
    return (f"{problem.consumer} {problem.consumer_version} finds {', '.join(problem.functions)} with dlsym at run "
            f"time ({problem.feature}); {COMPILERS[problem.kind]} {problem.release} ({problem.provider}) does not "
            f"export {'it' if len(problem.functions) == 1 else 'them'}, {problem.provider} {problem.minimum} is the "
            f"first release that does: {cost}")


def _dlopened_not_found(problem: p.DlopenedNotFound) -> str:
    cuda = f"CUDA {problem.cuda_major} " if problem.cuda_major is not None else ""
    wheels = f" ({cuda}wheel: {', '.join(problem.providers)})" if problem.providers else ""
    return (f"{_name(problem.consumer)} opens {problem.soname} by name with dlopen at run time; no copy is "
            f"loadable from it{wheels}: what needs it fails or falls back")


def _dlopened_other_major(problem: p.DlopenedOtherMajor) -> str:
    return (f"{_name(problem.consumer)} (CUDA {problem.cuda_major}) opens {problem.soname} by name with dlopen at "
            f"run time, and finds {problem.found}, the CUDA {problem.found_major} copy of {problem.owner}")


def _framework_abi(problem: p.FrameworkAbiMismatch) -> str:
    files = ", ".join(_name(file) for file in problem.files)
    built = (f"built for {problem.framework} {problem.built_for} (its exact pin)" if problem.built_for
             else f"built for another {problem.framework} release (unknown: it pins none)")
    count = len(problem.symbols)
    return (f"{files}: {built}, but {problem.framework} {problem.installed} is installed, whose libraries lack "
            f"{count} C++ symbol{'s' if count != 1 else ''} {'they bind' if len(problem.files) > 1 else 'it binds'} "
            f"(\"undefined symbol\" at import)")


def _plugin_host(problem: p.PluginHostMismatch) -> str:
    files = ", ".join(_name(file) for file in problem.files)
    count = len(problem.symbols)
    library = _name(problem.library) if problem.library else f"{problem.host}'s libraries"
    some = ", ".join(problem.symbols[:2]) + (", …" if count > 2 else "")
    return (f"{files}: built for another {problem.host} release than {problem.host} {problem.installed} beside "
            f"{'them' if len(problem.files) > 1 else 'it'}, whose {library} lacks {count} C++ "
            f"symbol{'s' if count != 1 else ''} {'they bind' if len(problem.files) > 1 else 'it binds'} ({some}); "
            f"{problem.host} loads {'them' if len(problem.files) > 1 else 'it'} by path: \"undefined symbol\"")


def host_has(driver: object, cuda: object) -> str:
    """What the host's driver is, for a driver-floor finding."""
    parts = [f"driver {driver}" if driver else "driver release unknown"]
    if cuda:
        parts.append(f"CUDA {cuda}")
    return "host has " + ", ".join(parts)


def _driver_too_old(problem: p.DriverTooOld) -> str:
    return f"built for CUDA {problem.cuda}: {words(problem)}: \"CUDA driver version is insufficient for CUDA runtime version\""


def _device_code_skipped(problem: p.DeviceCodeSkipped) -> str:
    return f"device code skipped: {skipped_because(problem.skip)}; its GPU coverage is not judged"


def _no_section_headers(problem: p.NoSectionHeaders) -> str:
    one = len(problem.files) == 1
    return (f"{len(problem.files)} librar{'y has' if one else 'ies have'} no section header table: "
            f"{'its' if one else 'their'} device code, if any, could not be looked for")


def _metadata_admits_older(problem: p.MetadataAdmitsOlder) -> str:
    declared = f"declares '{problem.declared}'" if problem.declared else f"does not declare {problem.provider}"
    admits = f", which admits {version_list(problem.admitted)}" if problem.admitted else ""
    return (f"needs {problem.provider} >= {problem.minimum} ({_name(problem.consumer)} binds {problem.symbol}) but "
            f"{declared}{admits}")


LIBRARY_NAMES = {"cudnn": "cuDNN", "cublas": "cuBLAS", "nccl": "NCCL", "cusparse": "cuSPARSE", "cufft": "cuFFT",
                 "cusolver": "cuSOLVER", "nvrtc": "NVRTC", "nvjitlink": "nvJitLink"}


def _below_build_floor(problem: p.BelowBuildFloor) -> str:
    library = LIBRARY_NAMES.get(problem.library, problem.library)
    if problem.record is not None:
        file, name, value = problem.record
        return (f"was built against {library} {problem.floor} ({file}: {name} {value!r}), but {problem.provider} "
                f"{problem.installed} is installed; it refuses an older {library} than it was built against when it loads")
    extra = f" (its extra [{problem.extra}])" if problem.extra else ""
    return (f"requires {library} >= {problem.floor}{extra}: '{problem.required}', but {problem.provider} "
            f"{problem.installed} is installed; it refuses an older {library} than it was built against when it loads")


def _owned_twice(problem: p.OwnedTwice) -> str:
    owners = " and ".join(f"{owner.name} {owner.version}" for owner in problem.owners)
    what = "installed" if len(problem.files) == 1 else f"{len(problem.files)} files are installed"
    there = f"; the bytes there are {problem.on_disk}'s" if problem.on_disk else ""
    return (f"{what} by both {owners} with different contents: the last installed wins, and "
            f"uninstalling either deletes it{there}")


def version_list(versions: tuple[str, ...]) -> str:
    """Versions for a message, oldest first: all of a few, or the ends and the count of many
    ("12.0.76 … 12.3.101, 9 releases")."""
    if len(versions) <= 4:
        return ", ".join(versions)
    return f"{versions[0]} … {versions[-1]}, {len(versions)} releases"


_PROBLEMS: dict[type, Callable[..., str]] = {
    p.Unreadable: lambda problem: problem.reason,
    p.BinaryFactsUnreadable: lambda problem: f"cannot read its binary facts: {problem.error}",
    p.ForeignMachine: lambda problem: (f"built for {problem.machine}: this machine's loader cannot load it, so it was "
                                       "not checked"),
    p.DeviceCodePartlyUnreadable: lambda problem: (f"device code partly unreadable ({problem.damage}): its GPU coverage "
                                                   "is judged on what could be read"),
    p.DeviceCodeSkipped: _device_code_skipped,
    p.NoSectionHeaders: _no_section_headers,
    p.CacheUnwritable: lambda problem: problem.reason,
    p.HostUnknown: lambda problem: "no NVIDIA driver or GPU found: driver and GPU checks were skipped",
    p.LibraryNotLoaded: lambda problem: f"{_name(problem.consumer)}: {problem.loader_message}",
    p.FoundOnlyAfterCall: _found_only_after_call,
    p.NoAlternativeLoads: _no_alternative_loads,
    p.OptionalFeaturesMissing: _optional_features,
    p.PluginLibrariesMissing: _plugin_libraries,
    p.SymbolSkew: lambda problem: f"{_name(problem.named)}: {problem.loader_message}",
    p.FrameworkAbiMismatch: _framework_abi,
    p.PluginHostMismatch: _plugin_host,
    p.CpuOnly: lambda problem: f"{words(problem)}: it does not use the host's GPU",
    p.UnusedBridge: lambda problem: (f"bridge unused: {_name(problem.consumer)} binds {len(problem.symbols)} symbols "
                                     f"of {problem.provider}, which is not installed; it is imported only with "
                                     f"{problem.provider}"),
    p.Shadowed: _shadowed,
    p.DuplicateBuilds: _duplicate_builds,
    p.PrivateCopies: _private_copies,
    p.NoDeviceCode: _no_device_code,
    p.OptInUnavailable: lambda problem: (f"opt-in feature unavailable on compute capability {problem.cc}: "
                                         f"{problem.feature} has no kernel image for it"),
    p.DriverTooOld: _driver_too_old,
    p.MinorCompat: lambda problem: f"{words(problem)} (PTX from the newer toolkit cannot be JIT-compiled)",
    p.UndatedRuntime: lambda problem: (
        f"{', '.join(map(_name, problem.files))} link{'s' if len(problem.files) == 1 else ''} a CUDA runtime in statically "
        "whose release no byte tells (no toolkit note in its cubins, no PTX of a known ISA): its driver floor is unknown"),
    p.MixedMajors: _mixed_majors,
    p.CompanionMajors: lambda problem: (f"links CUDA {', '.join(map(str, problem.needs))} libraries, but the "
                                        f"environment's wheels of them are CUDA {', '.join(map(str, problem.installed))}"
                                        + (f"; features unavailable: {'; '.join(problem.later)} (the import goes on "
                                           "without them)" if problem.later else "")),
    p.PreloadedOtherMajor: lambda problem: (
        f"its import loads CUDA {problem.picked_major} builds of {', '.join(problem.sonames)} "
        f"({', '.join(f'{w.name} {w.version}' for w in problem.wheels)}), which its CUDA {problem.major} build "
        f"links: its own search for CUDA libraries finds them first, and its libraries bind them"),
    p.KnownBadRelease: words,
    p.SbsaOnJetson: words,
    p.BelowPackageFloor: words,
    p.MetadataAdmitsOlder: _metadata_admits_older,
    p.BelowBuildFloor: _below_build_floor,
    p.CompilerCannotTargetGpu: _compiler_cannot_target,
    p.CompilerPtxTooNew: _compiler_ptx_too_new,
    p.LinkerCannotRead: _linker_cannot_read,
    p.DlsymFunctionsMissing: _dlsym_missing,
    p.DlopenedNotFound: _dlopened_not_found,
    p.DlopenedOtherMajor: _dlopened_other_major,
    p.OwnedTwice: _owned_twice,
    p.ImportFailed: lambda problem: (
        f"import {problem.module} fails: {problem.kind}: {problem.message}"
        + (" (a library of the NVIDIA driver: this machine may have none)" if problem.driver else "")),
    p.ImportNotObserved: lambda problem: (f"the import of {', '.join(problem.modules)} could not be observed "
                                          f"({problem.reason}): the judgement from its files stands"),
}


# -- evidence -------------------------------------------------------------------------------------


def render_evidence(item: e.Evidence) -> str:
    return _EVIDENCE[type(item)](item)


def render_verdict(verdict: Verdict) -> str:
    """Why device code does not run on a GPU (compat.can_run's verdict)."""
    if verdict.runs:
        return f"{verdict.target} {'SASS' if verdict.via == 'sass' else 'PTX'} runs on compute capability {verdict.cc}"
    reason = (f"no SASS for compute capability {verdict.cc} and no usable PTX "
              f"(has {', '.join(verdict.has) or 'no device code'})")
    for failure in verdict.jit_failures:
        if failure.needs is None:
            reason += f"; {failure.target} PTX (ISA {failure.isa or 'unknown'}) is newer than every toolkit cudaresolve knows"
        else:
            reason += (f"; {failure.target} PTX has ISA {failure.isa}, which driver {failure.driver} cannot JIT "
                       f"(needs >= {failure.needs}; CUDA_ERROR_UNSUPPORTED_PTX_VERSION)")
    return reason


def _unfound(item: e.Unfound) -> str:
    if item.refused is not None:
        where = f"the loader finds {item.refused} first ({item.refused_step}) and cannot load it"
    elif item.copies:
        where = f"the environment's copy ({', '.join(item.copies)}) is not on its search path"
    else:
        where = "nothing on its search path, in the environment or in the system provides it"
    return f"{item.consumer} needs {item.needed}; {where}"


def _more(item: e.More) -> str:
    return f"... and {item.count} more" + (" libraries" if item.libraries else "")


def _loader_picks(item: e.LoaderPicks) -> str:
    owner = f", from {render_subject(item.owner)}" if item.owner else ""
    return f"the loader picks {item.path} ({item.step}){owner}"


def _bridge_symbols(item: e.BridgeSymbols) -> str:
    more = f" and {len(item.symbols) - 3} more" if len(item.symbols) > 3 else ""
    return f"{item.consumer} needs {', '.join(item.symbols[:3])}{more}, which {item.provider} defines"


def _loaded_by(item: e.LoadedBy) -> str:
    more = f" and {len(item.consumers) - 3} more" if len(item.consumers) > 3 else ""
    owner = _owned_by(item.owner, item.conda)
    return (f"{item.path} (from {owner}) is what {', '.join(item.consumers[:3])} "
            f"load{'s' if len(item.consumers) == 1 else ''}{more}")


def _copy_use(item: e.CopyUse) -> str:
    owner = _owned_by(item.owner, item.conda)
    if item.consumers:
        use = "found by the loader for " + ", ".join(item.consumers[:3])
    else:
        use = "loaded by no package judged here" if item.conda else "loaded by path only"
    return f"{item.path} (from {owner}): {use}"


def _dependencies(item: e.DependenciesFailToo) -> str:
    if item.cc is not None:
        return f"its CUDA dependencies lack code for {item.cc} too: {', '.join(item.names)}"
    return f"its CUDA dependencies need that driver too: {', '.join(item.names)}"


def _family(item: e.FamilyFailsToo) -> str:
    if item.cc is not None:
        return f"the packages built for its variant lack code for {item.cc} too: {', '.join(item.names)}"
    return f"the packages built for its variant need that driver too: {', '.join(item.names)}"


def _cuda_runtime_in(item: e.CudaRuntimeIn) -> str:
    if item.linkage == "static":
        what = f"{item.file} links the CUDA {item.release or item.major} runtime in statically"
    else:
        what = f"{item.file} is a CUDA {item.release or item.major} runtime (version node libcudart.so.{item.major})"
    where = {"file name": "its file name", "toolkit note": "its cubins' toolkit note (.note.nv.tkinfo)",
             "PTX ISA": "its PTX's ISA version (the oldest toolkit that writes it)"}
    return f"{what}, release read from {where.get(item.read_from, item.read_from)}" if item.read_from else what


def _references(item: e.References) -> str:
    named = f"{item.symbol}@{item.version}" if item.version else item.symbol
    return f"{item.file} references {named}"


def _file_bytes(item: e.FileBytes) -> str:
    recorded = ", ".join(f"{name} records {digest[:19] + '…' if digest else 'no hash'}" for name, digest in item.recorded)
    if item.unjudged:
        there = f"not compared ({item.unjudged})"
    else:
        there = f"the bytes there are {item.on_disk}'s" if item.on_disk else "the bytes there are no owner's"
    return f"{item.path}: {recorded}; {there}"


def _shared_by(item: e.SharedBy) -> str:
    there = f", the bytes there are {item.on_disk}'s" if item.on_disk else ""
    return f"{item.path} is installed by both {' and '.join(item.owners)}{there} (see owned-twice)"


_EVIDENCE: dict[type, Callable[..., str]] = {
    e.Said: lambda item: f"{item.source}: {item.text}" if item.source else item.text,
    e.File: lambda item: item.path,
    e.Owned: lambda item: item.distribution,
    e.More: _more,
    e.MoreOf: lambda item: f"... and {item.count} more libraries of {item.owner or UNOWNED}",
    e.InstalledBy: lambda item: f"installed by {render_subject(item.subject)}",
    e.LoaderError: lambda item: f"{item.file}: {item.message}",
    e.Unfound: _unfound,
    e.LoadedByCall: lambda item: f"{item.consumer} needs {item.needed}; {item.module}.{item.function}() loads {item.path}",
    e.Needs: lambda item: f"{item.file} needs {', '.join(item.names)}",
    e.ImportLoaded: lambda item: f"the observed import loaded {item.path}",
    e.SearchPicks: lambda item: (f"{item.picked} (from {item.owner}) is loaded for {item.soname}: the search looks in "
                                 f"{item.directory} first" + (f", before {item.own_directory}" if item.own_directory else "")
                                 + (f", where its own {item.own} is" if item.own else "")),
    e.LoaderPicks: _loader_picks,
    e.BridgeSymbols: _bridge_symbols,
    e.Chosen: lambda item: f"{item.consumer} needs {item.needed}: chosen {item.path} ({item.step})",
    e.EnvironmentCopy: lambda item: f"environment copy: {item.path}",
    e.LoadedBy: _loaded_by,
    e.CopyUse: _copy_use,
    e.NoCodeFor: lambda item: f"{item.path}: {render_verdict(item.why)}",
    e.DependenciesFailToo: _dependencies,
    e.FamilyFailsToo: _family,
    e.BuiltWith: lambda item: item.text,
    e.CudaRuntimeIn: _cuda_runtime_in,
    e.HostDriver: lambda item: host_has(item.release, item.cuda),
    e.MajorUsers: lambda item: f"CUDA {item.major}: {', '.join(item.names)}",
    e.LinksOtherMajor: lambda item: f"{_name(item.file)} needs {item.needed}; installed: {', '.join(item.installed)}",
    e.References: _references,
    e.SymbolNeed: lambda item: f"{item.file} needs {item.symbol} from {item.soname}",
    e.FileBytes: _file_bytes,
    e.SharedBy: _shared_by,
}
