"""Fixes in words: one renderer per fix type of checks/fixes.py, and per reason a fix is offered.

The words of today's reports are kept exactly (docs/doctor.md quotes them); a command is written
so that it can be pasted into a shell (each requirement double-quoted).

May import: checks/fixes.py and the value types; nothing that judges, scans or resolves.
"""

from __future__ import annotations

from typing import Any, Callable

from cudaresolve.arch import ComputeCapability
from cudaresolve.checks import fixes as f
from cudaresolve.checks.fixes import Fix, Why

TABLE = "cudaresolve's table"


def render_fix(fix: Fix) -> str:
    return _RENDER[type(fix)](fix)


def _quoted(requirement: object) -> str:
    return f'"{requirement}"'


def _pip_install(fix: f.PipInstall) -> str:
    replaces = f" in place of {', '.join(fix.replaces)}" if fix.replaces else ""
    options = "".join(f" {option}" for option in fix.options)
    return f"pip install{options} {' '.join(map(_quoted, fix.requirements))}{replaces}"


def _torch_variant(fix: f.TorchVariant) -> str:
    return (f"install the {fix.variant} variant: {' '.join(map(str, fix.requirements))} from the PyTorch index "
            f"({fix.index_path}), with {'their' if fix.companions else 'its'} matching CUDA wheels")


def _conda_install(fix: f.CondaInstall) -> str:
    return "conda install " + " ".join(_quoted(f"{spec.name}{spec.relation}{spec.version}") for spec in fix.specs)


def _keep_one_build(fix: f.KeepOneBuild) -> str:
    if fix.remove is None:
        return "install releases of these packages that load one build of it (the evidence says who loads which)"
    remove = f"conda remove {fix.remove}" if fix.conda else f"uninstall {fix.remove}"
    return f"keep one build: {remove}, which nothing installed requires, or install releases that share one provider"


def _gpus(ccs: tuple[ComputeCapability, ...]) -> str:
    """The GPUs a release must run on, as the fixes name them."""
    if len(ccs) == 1:
        return f"compute capability {ccs[0]}"
    return f"every GPU here (compute capabilities {', '.join(map(str, ccs))})"


def _no_known_release(fix: f.NoKnownRelease) -> str:
    if fix.runs_on:
        condition = f"runs on {_gpus(fix.runs_on)}"
    elif fix.cuda_major is not None:
        condition = f"is built for CUDA {fix.cuda_major}"
    else:
        condition = "is built for a CUDA this driver runs"
    return f"no release of {' or '.join(fix.names)} in {TABLE} {condition}"


def _build_with_cuda(fix: f.BuildWithCuda) -> str:
    return (f"use a build made with CUDA <= {fix.maximum} (the newest toolkit that still targets {fix.cc}"
            + (" and this driver runs)" if fix.driver_known else ")"))


def _older_release(fix: f.OlderReleaseMayCarry) -> str:
    return (f"{fix.distribution} {fix.version} is built with CUDA {fix.cuda} and still lacks code for {fix.cc}: an "
            f"older release of {fix.distribution} may carry sm_{fix.cc.arch_number}; the device code of its "
            "releases is not known here, so none is named")


def _newer_release(fix: f.NewerReleaseNeeded) -> str:
    return (f"{fix.distribution} {fix.version} is built with CUDA {fix.cuda}, older than the first CUDA that targets "
            f"{fix.cc} ({fix.minimum}): install a newer release of {fix.distribution} built with CUDA >= {fix.minimum}; "
            "no older release carries it")


def _explained(fix: f.Explained) -> str:
    before, after = _why(fix.why)
    return f"{before}{render_fix(fix.fix)}{after}"


def _refusal(why: f.Refusal) -> str:
    """Why a tried fix was not printed, after the fix's own words."""
    if isinstance(why, f.NotOffered):
        where = "the cached index pages (--offline)" if why.offline else "the configured indexes"
        return f"no release of {why.requirement.name} on {where} meets {_quoted(why.requirement)}"
    if isinstance(why, f.NoBuildOffered):
        where = "the cached index pages (--offline)" if why.offline else "the configured indexes"
        return f"{where} offer no build of {why.name} for CUDA {why.major}"
    if isinstance(why, f.KeepsFinding):
        return "the finding stays after it"
    if isinstance(why, f.AddsError):
        return f"it brings a new {why.check} error on {why.subject or 'the environment'}"
    if isinstance(why, f.BreaksRequirement):
        extra = f" (extra {why.extra})" if why.extra else ""
        now = f"it would install {why.planned}" if why.planned is not None else "it would remove it"
        return f"{why.distribution} {why.version} requires {_quoted(why.requirement)}{extra}; {now}"
    if isinstance(why, f.NoMajorTargets):
        majors = " or ".join(f"CUDA {major}" for major in why.majors)
        where = "the cached index pages (--offline) hold" if why.offline else "the configured indexes offer"
        newest = (f"the newest CUDA that does is {why.newest}, and {where} no release of {why.name} built with it"
                  if why.newest is not None else "no CUDA this driver runs does")
        return f"no {majors} release builds code for {_gpus(why.ccs)}; {newest}"
    if why.kept is None:
        return f"it brings CUDA {why.major} builds, which this driver cannot run"
    return f"it moves the environment from CUDA {why.kept} to CUDA {why.major}"


def _no_fix_found(fix: f.NoFixFound) -> str:
    tried = "; ".join(f"{render_fix(refused.fix)}: {_refusal(refused.why)}" for refused in fix.tried)
    return f"no fix found here ({tried})" if tried else "no fix found here"


def _with_install(fix: f.WithInstall) -> str:
    line = f"cudaresolve install {' '.join(map(_quoted, fix.requirements))}"
    if fix.uninstall:
        line = f"pip uninstall {' '.join(fix.uninstall)}, then {line}"
    return f"{render_fix(fix.fix)} (or, locked and judged again: {line})"


def _unchecked(fix: f.Unchecked) -> str:
    why = (f"an index could not be read: {fix.unreadable}" if fix.unreadable is not None
           else "the cached index pages (--offline) lack what it needs")
    return f"{render_fix(fix.fix)} (not checked against the indexes: {why})"


_RENDER: dict[type, Callable[[Any], str]] = {  # each takes the fix type it is filed under
    f.PipInstall: _pip_install,
    f.PipUninstall: lambda fix: f"pip uninstall {' '.join(fix.names)}",
    f.TorchVariant: _torch_variant,
    f.CondaInstall: _conda_install,
    f.CondaUpdate: lambda fix: f"conda update {fix.package}",
    f.DriverUpgrade: lambda fix: ("upgrade the driver to >= " + str(fix.minimum) if fix.minimum is not None
                                  else "upgrade the driver to one that runs the build's CUDA (the tables hold no floor for it)"),
    f.Call: lambda fix: (f"call {fix.module}.{fix.function}() before the first use (see the package's documentation "
                         "for other ways it preloads)"),
    f.AddToPath: lambda fix: f"put {fix.directory or 'its directory'}{' first' if fix.first else ''} on {fix.variable}",
    f.RemoveFromPath: lambda fix: f"remove {fix.entry} from {fix.variable}",
    f.RemoveStaleDirectory: lambda fix: f"remove the stale directory from {fix.variable}",
    f.RemoveCopy: lambda fix: "remove that copy",
    f.KeepOneBuild: _keep_one_build,
    f.AddConstraint: lambda fix: (f"keep the release installed: add {_quoted(fix.requirement)} to your constraints file "
                                  "(pip's -c FILE or PIP_CONSTRAINT)"),
    f.AdvisoryFix: lambda fix: fix.text,
    f.StateHost: lambda fix: ("judge for a GPU machine with --host FILE (from `cudaresolve probe --json` there) "
                              "or --driver/--gpu"),
    f.ReleaseThatFinds: lambda fix: "install a release of its package that finds it",
    f.FindWheelCopy: lambda fix: "make the package find its wheel's copy (fix its RPATH or the preload order)",
    f.BuildWithCuda: _build_with_cuda,
    f.OlderReleaseMayCarry: _older_release,
    f.NewerReleaseNeeded: _newer_release,
    f.NoKnownRelease: _no_known_release,
    f.InstallBuild: lambda fix: f"install a build of {', '.join(fix.of)} for CUDA {fix.cuda or 'your driver supports'}",
    f.InstallBuildsOf: lambda fix: f"install the CUDA {fix.major} builds of: {', '.join(fix.names)}",
    f.InstallWheels: lambda fix: f"install the CUDA {fix.major} wheels ({', '.join(fix.names)})",
    f.BuildOf: lambda fix: f"a build of {fix.name} for CUDA {fix.major}",
    f.Alternatives: lambda fix: ", or ".join(map(render_fix, fix.options)),
    f.OrElse: lambda fix: f"{render_fix(fix.first)}; or {render_fix(fix.second)}",
    f.Steps: lambda fix: ", then ".join(map(render_fix, fix.steps)),
    f.Each: lambda fix: "; ".join(map(render_fix, fix.fixes)),
    f.Explained: _explained,
    f.NoFixFound: _no_fix_found,
    f.WithInstall: _with_install,
    f.Unchecked: _unchecked,
}


def _why(why: Why) -> tuple[str, str]:
    """The words before and after a fix that say why it is offered."""
    return _WHY[type(why)](why)


def _newest_cuda_for_arch(why: f.NewestCudaForArch) -> tuple[str, str]:
    runs = " and this driver runs" if why.driver_known else ""
    return "", f" (the newest CUDA that still targets {why.cc}{runs}; {why.comes_with} comes with the prefix's CUDA)"


def _picked_other(why: f.PickedOther) -> tuple[str, str]:
    copy = f" ({why.copy})" if why.copy else ""
    return (f"{why.distribution} {why.version}{copy} has what {why.consumer} needs, but the loader picks "
            f"{why.chosen} ({why.step}) first: "), ""


_COMPILERS = {"nvrtc": "NVRTC", "nvvm": "NVVM", "nvjitlink": "nvJitLink"}


def _pairs_with(why: f.PairsWith) -> tuple[str, str]:
    other = f"{_COMPILERS[why.kind]} {why.release}"
    return "", f" (whose output {other} reads)" if why.kind == "nvjitlink" else f" (reads what {other} writes)"


def _compiler_fits(why: f.CompilerFits) -> tuple[str, str]:
    loads = f" and whose PTX this driver loads (ISA <= {why.driver_ptx_isa})" if why.driver_ptx_isa else ""
    return "", f" (the newest release in {TABLE} that targets {_gpus(why.ccs)}{loads})"


def _right_owner(why: f.RightOwner) -> tuple[str, str]:
    if why.rule == "required":
        reason = f"{', '.join(why.by)} require{'s' if len(why.by) == 1 else ''} it"
    elif why.rule == "cuda-major":
        reason = f"the environment's CUDA runtime is CUDA {why.major}"
    else:
        reason = "its bytes are the ones there now"
    return f"keep {why.distribution} ({reason}): ", ""


_WHY: dict[type, Callable[..., tuple[str, str]]] = {
    f.AlsoProvidedBy: lambda why: ("", f" (also provided by {', '.join(why.names)})"),
    f.ToEnable: lambda why: ("to enable: ", ""),
    f.Constrain: lambda why: ("constrain it: ", " (or add it to your constraints file)"),
    f.BuildLibraries: lambda why: ("", f" (the CUDA {why.major} libraries its {why.directory} build needs)"),
    f.TakeRoute: lambda why: (f"take the CUDA {why.major} route: ", ""),
    f.DriverCannotRun: lambda why: (f"this driver cannot run CUDA {why.major}; ", ""),
    f.WheelsOfMajors: lambda why: ("", f" (CUDA {' and '.join(map(str, why.majors))} wheels)"),
    f.NoneFitsEither: lambda why: ("", f" (no release of {', '.join(why.names)} in {TABLE} fits here either)"),
    f.NewestThatRuns: lambda why: ("", f" (the newest release in {TABLE} whose device code runs on {_gpus(why.ccs)})"),
    f.OfferedThatRuns: lambda why: ("", f" (the newest release the indexes offer whose device code runs on {_gpus(why.ccs)})"),
    f.CompilerFits: _compiler_fits,
    f.PairsWith: _pairs_with,
    f.NewestForDriver: lambda why: ("", f" (the newest release in {TABLE} built for a CUDA this driver runs"
                                        + (f": CUDA {why.cuda})" if why.cuda else ")")),
    f.NewestOwnRuntime: lambda why: ("", f" (the newest release whose own CUDA runtime, {why.cuda}, "
                                         f"{f'driver {why.driver}' if why.driver else 'the driver'} runs"
                                         + (" by minor-version compatibility" if why.compatibility else "")
                                         + (f" and whose device code runs on {_gpus(why.ccs)})" if why.ccs else ")")),
    f.NewestBuildOf: lambda why: ("", f" (the newest CUDA {why.major} build of {why.name} in {TABLE})"),
    f.NewestCudaForArch: _newest_cuda_for_arch,
    f.ForNativeSupport: lambda why: ("", " for native support"),
    f.PinToDriverCuda: lambda why: (f"pin {'it' if why.count == 1 else 'them'} to the driver's CUDA: ", ""),
    f.UseBuildInstead: lambda why: (f"use the {f'CUDA {why.major} ' if why.major is not None else ''}build instead: ", ""),
    f.SameCupyRelease: lambda why: ("", f" (the same CuPy release built for CUDA {why.major}; only one CuPy may be "
                                        "installed)"),
    f.NotWhereItLooks: lambda why: (f"{why.owner or 'the environment'} has it, but not where {why.consumer} looks: ", ""),
    f.PicksConda: lambda why: ("", f" (the conda package whose {why.soname} the loader picks)"),
    f.PreloaderLooksFirst: lambda why: ("", f" ({why.preloader}'s preloader looks in site-packages first)"),
    f.LooksFirstIn: lambda why: ("", f" ({why.consumer} looks in {why.directory} first)"),
    f.TakenFirst: lambda why: ("", f": the loader takes its {why.soname} first"),
    f.PreloadServes: lambda why: ("", f": it is loaded before everything and serves {why.soname}"),
    f.PickedOther: _picked_other,
    f.NoKnownRelease: lambda why: ("", f": {_no_known_release(why)}"),
    f.ConsumersRange: lambda why: ("", f" ({'in ' if why.runs_on else ''}the range {why.distribution} {why.version}"
                                       f"{f' [{why.extra}]' if why.extra else ''} requires"
                                       + (f", the newest release in {TABLE} whose device code runs on {_gpus(why.runs_on)})"
                                          if why.runs_on else ")")),
    f.BuiltAgainst: lambda why: ("", f" (the release {why.distribution} {why.version} was built against, "
                                     f"as its {why.record} records)"),
    f.MadeFor: lambda why: ("", f" (the {why.distribution} release made for {why.framework} {why.version})"),
    f.RightOwner: _right_owner,
}
