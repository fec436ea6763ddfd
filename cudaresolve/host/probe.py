"""The host every command judges against: probed, read from --host FILE, and/or overridden.

Probing asks the sources in a fixed order and takes each fact from the first source that tells
it: NVML, /sys/module/nvidia/version, /proc/driver/nvidia/version, libcuda (in a child process),
nvidia-smi. It stops as soon as every wanted fact is known, so a healthy machine costs one NVML
session. A source that cannot answer leaves a Note saying why: no GPU, or no driver, is a normal
result. Stated facts (an Overrides value, made once by commands/host_options.py) are never probed;
a release without a CUDA version gets it from the driver branch table, marked "derived:branch-table".
"""

from __future__ import annotations

import errno
import os
import sys
from dataclasses import replace
from typing import Callable, Iterator, Mapping, Optional, Sequence, TextIO

from cudaresolve.bounded import MAX_INPUT_FILE, read_bounded
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import NOTHING_STATED, Driver, Gpu, HostFacts, Note, Overrides, check_known
from cudaresolve.host.readers import Readers, SourceUnavailable, system_readers
from cudaresolve.host.sources import (
    SMI_FIELDS,
    Reading,
    command_failure,
    parse_libcuda,
    parse_nvml,
    parse_procfs,
    parse_smi_csv,
    parse_smi_xml,
    parse_sysfs,
    parse_tegra,
)
from cudaresolve.host.visibility import apply_visible_devices
from cudaresolve.versions import CudaVersion, DriverRelease

SYSFS_VERSION = "/sys/module/nvidia/version"
PROCFS_VERSION = "/proc/driver/nvidia/version"
TEGRA_RELEASE = "/etc/nv_tegra_release"
DEVICE_TREE_COMPATIBLE = "/proc/device-tree/compatible"
SMI_CSV = ("nvidia-smi", "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv")
SMI_XML = ("nvidia-smi", "-q", "-x")
DERIVED = "derived:branch-table"


def host_for(
    host_file: Optional[str] = None,
    overrides: Overrides = NOTHING_STATED,
    environ: Mapping[str, str] = os.environ,
    readers: Optional[Readers] = None,
    stdin: Optional[TextIO] = None,
) -> HostFacts:
    """The host facts for a command: `host_file` or a probe (its sources and CUDA_VISIBLE_DEVICES
    read from `environ`), with the stated `overrides` on top."""
    if host_file is not None:
        base = load_host_file(host_file, stdin or sys.stdin)
    else:
        base = probe(
            readers or system_readers(environ),
            environ,
            want_driver=overrides.driver is None,
            want_gpus=overrides.gpus is None,
        )
    return derive_cuda(apply_overrides(base, overrides))


def stated_over(base: HostFacts, overrides: Overrides) -> HostFacts:
    """Facts read elsewhere (a node's labels) with the overrides on top, as `host_for` treats a host file."""
    return derive_cuda(apply_overrides(base, overrides))


def load_host_file(path: str, stdin: TextIO) -> HostFacts:
    """Read `probe --json` output back ("-" is stdin); any problem is a UsageError naming the path.

    Its stated GPUs are checked like --gpu; the ones a probe found are not (facts.check_known).
    """
    origin = f"--host {path}"
    try:
        if path == "-":
            text = stdin.read(MAX_INPUT_FILE + 1)
            if len(text) > MAX_INPUT_FILE:
                raise OSError(errno.EFBIG, f"larger than {MAX_INPUT_FILE >> 20} MiB")
        else:
            text = read_bounded(path).decode("utf-8")
    except OSError as exc:
        raise UsageError(f"{origin}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{origin}: not UTF-8 text") from None
    facts = HostFacts.from_json(text, origin=origin)
    for i, gpu in enumerate(facts.gpus):
        if gpu.stated:
            try:
                check_known(gpu.compute_capability)
            except UsageError as exc:
                raise UsageError(f"{origin}: gpus[{i}].compute_capability: {exc}") from None
    return facts


def probe(
    readers: Readers, environ: Mapping[str, str], want_driver: bool = True, want_gpus: bool = True
) -> HostFacts:
    """Ask the sources in order until the wanted facts are known; nothing wanted, nothing asked."""
    system, machine, glibc = readers.platform()
    tegra_note = parse_tegra(
        _optional_file(readers, TEGRA_RELEASE), _optional_file(readers, DEVICE_TREE_COMPATIBLE)
    )
    notes: list[Note] = [tegra_note] if tegra_note else []
    release: Optional[DriverRelease] = None
    cuda: Optional[CudaVersion] = None
    release_source: Optional[str] = None
    cuda_source: Optional[str] = None
    found_gpus: Optional[tuple[Gpu, ...]] = None

    def satisfied() -> bool:
        driver_known = not want_driver or (release is not None and cuda is not None)
        return driver_known and (not want_gpus or found_gpus is not None)

    if satisfied():
        notes.append(Note("probe", "not run: the overrides state the driver and the GPUs"))
    for reading in _readings(readers, tegra=tegra_note is not None, satisfied=satisfied):
        for note in reading.notes:
            if note not in notes:  # nvidia-smi's CSV and XML runs fail with the same words
                notes.append(note)
        if release is None and reading.release is not None:
            release, release_source = reading.release, reading.source
        if cuda is None and reading.cuda is not None:
            cuda, cuda_source = reading.cuda, reading.source
        if found_gpus is None and reading.gpus is not None:
            found_gpus = reading.gpus

    gpus = found_gpus or ()
    visible = environ.get("CUDA_VISIBLE_DEVICES") if want_gpus and found_gpus is not None else None
    if visible is not None:
        gpus, visibility_notes = apply_visible_devices(gpus, visible, environ.get("CUDA_DEVICE_ORDER"))
        notes.extend(visibility_notes)
    return HostFacts(
        system=system,
        machine=machine,
        glibc=glibc,
        tegra=tegra_note is not None,
        driver=Driver(release=release, release_source=release_source, cuda=cuda, cuda_source=cuda_source),
        gpus=gpus,
        cuda_visible_devices=visible,
        notes=tuple(notes),
    )


def _readings(readers: Readers, tegra: bool, satisfied: Callable[[], bool]) -> Iterator[Reading]:
    """Each source's reading, in order, each read only while something wanted is still unknown."""
    steps: list[tuple[str, Callable[[], Reading]]] = [
        ("sysfs", lambda: parse_sysfs(readers.read_file(SYSFS_VERSION))),
        ("procfs", lambda: parse_procfs(readers.read_file(PROCFS_VERSION))),
        ("libcuda", lambda: parse_libcuda(readers.libcuda())),
        ("nvidia-smi", lambda: _smi(readers, SMI_CSV, parse_smi_csv)),
        # The CSV query cannot give the driver's CUDA version; the XML report can.
        ("nvidia-smi", lambda: _smi(readers, SMI_XML, parse_smi_xml)),
    ]
    if not tegra:
        steps.insert(0, ("nvml", lambda: parse_nvml(readers.nvml())))
    for source, read in steps:
        if satisfied():
            return
        try:
            yield read()
        except SourceUnavailable as exc:
            yield Reading(source, notes=(Note(source, str(exc)),))


def _smi(readers: Readers, argv: Sequence[str], parse: Callable[[str], Reading]) -> Reading:
    result = readers.run(argv)
    if result.returncode != 0:
        failure = command_failure("nvidia-smi", result.returncode, result.stdout, result.stderr)
        return Reading("nvidia-smi", notes=(failure,))
    return parse(result.stdout)


def _optional_file(readers: Readers, path: str) -> Optional[str]:
    try:
        return readers.read_file(path)
    except SourceUnavailable:
        return None


def apply_overrides(facts: HostFacts, overrides: Overrides) -> HostFacts:
    """Stated facts replace probed or loaded ones: the whole driver, or the whole GPU list."""
    if overrides.driver is not None:
        facts = replace(facts, driver=overrides.driver)
    if overrides.gpus is not None:
        facts = replace(facts, gpus=overrides.gpus, cuda_visible_devices=None)
    return facts


def derive_cuda(facts: HostFacts) -> HostFacts:
    """Fill a missing driver CUDA version from the branch table; the reverse cannot be done."""
    driver = facts.driver
    if driver.release is not None and driver.cuda is None and driver.cuda_source is None:
        if facts.tegra:
            # Jetson releases (540.4.0 reports CUDA 12.6) do not follow the desktop branches.
            return _noted(facts, Note(DERIVED, "not used on Jetson/Tegra; the CUDA version is unknown"))
        from cudaresolve.knowledge import toolkits  # a table to parse: only a release without its CUDA version needs it

        cuda = toolkits.max_cuda_for_driver(driver.release)
        if cuda is not None:
            return replace(facts, driver=replace(driver, cuda=cuda, cuda_source=DERIVED))
        why = f"driver branch {driver.branch} is not in the table; its CUDA version is unknown"
        return _noted(facts, Note(DERIVED, why))
    if driver.cuda is not None and driver.release is None and driver.release_source is None:
        why = f"release unknown: a CUDA version ({driver.cuda}) does not determine a driver release"
        return _noted(facts, Note("driver", why))
    return facts


def _noted(facts: HostFacts, note: Note) -> HostFacts:
    """Add `note` once: a --host file written by `probe --json` already carries it."""
    return facts if note in facts.notes else facts.with_notes(note)
