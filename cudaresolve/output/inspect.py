"""Rendering `cudaresolve inspect`: what many libraries come to first, then per library what it needs and what it carries.

May import: env/inspect's values, binary/ facts, arch, output/progress (counting words); never the doctor's edge.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

from cudaresolve.arch import Target
from cudaresolve.binary.facts import SKIP_BAD_ARCH, SKIP_STEPS, BinaryFacts, CudaRuntime, DeviceCodeSkip
from cudaresolve.env.inspect import Inspected, Summary, provider_needs, summary
from cudaresolve.output.progress import counted

SCHEMA = 1


def skipped_because(skip: DeviceCodeSkip) -> str:
    """Why the reader refused a file's device code, in words ("its fatbin names sm_0, which is no CUDA target")."""
    if skip.reason == SKIP_BAD_ARCH:
        return f"its fatbin names {'compute' if skip.ptx else 'sm'}_{skip.value}, which is no CUDA target"
    if skip.reason == SKIP_STEPS:
        return f"its fatbin did not parse within {skip.value:,} steps"
    return f"its fatbin has more than {skip.value:,} distinct entry headers"


def _device_code(facts: BinaryFacts) -> str:
    fatbin = facts.fatbin
    if fatbin is None:
        return "none"
    if fatbin.skipped is not None:
        return f"skipped: {skipped_because(fatbin.skipped)}"
    if not fatbin.entries and fatbin.damage:
        return "unknown, none could be read"
    parts = []
    if fatbin.sass:
        parts.append("SASS " + ", ".join(fatbin.sass))
    if fatbin.ptx:
        parts.append("PTX " + ", ".join(f"{p.target} (ISA {p.isa or '?'})" for p in fatbin.ptx))
    if fatbin.undetermined:
        parts.append("a/f suffix unknown for " + ", ".join(fatbin.undetermined))
    if fatbin.unknown_kinds:
        parts.append("other entries " + ", ".join(f"kind {k} x{n}" for k, n in fatbin.unknown_kinds))
    if fatbin.toolkit:
        parts.append(f"built by CUDA {fatbin.toolkit} (cubin toolkit note)")
    return "; ".join(parts) or "fatbin without entries"


def _cuda_runtime(runtime: CudaRuntime) -> str:
    """ "linked in statically, CUDA 13.4.92 (from the toolkit note)", "this file is libcudart 12, release 12.6.77 (from the file name)"."""
    how = "linked in statically" if runtime.linkage == "static" else "this file is a CUDA runtime (libcudart)"
    if runtime.release:
        return f"{how}, CUDA {runtime.release} (from the {runtime.release_from})"
    if runtime.major is not None:
        return f"{how}, CUDA {runtime.major} (from its version node), release unknown"
    return f"{how}, release unknown (see the PTX ISA of its device code)"


def _span(targets: tuple[Target, ...]) -> str:
    if not targets:
        return "none"
    if len(targets) == 1:
        return str(targets[0])
    return f"{targets[0]} to {targets[-1]} ({counted(len(targets), 'target')})"


def summary_lines(found: Summary) -> list[str]:
    """The report's first lines: what the libraries below come to."""
    unread = f", {found.unread} could not be read" if found.unread else ""
    lines = [f"summary: {counted(found.read, 'library', 'libraries')} read{unread}"]
    lines.append(f"  CUDA libraries needed: {', '.join(found.cuda_needed) or 'none'}")
    skipped = f" (device code of {counted(found.device_code_skipped, 'library', 'libraries')} skipped: see below)" if found.device_code_skipped else ""
    lines.append(f"  SASS: {_span(found.sass)}; PTX: {_span(found.ptx)}{skipped}")
    carried: dict[str, list[str]] = {}  # the runtime in words -> the files that carry it
    for path, runtime in found.runtimes:
        carried.setdefault(_cuda_runtime(runtime), []).append(os.path.basename(path.split("!")[-1]))
    lines += [f"  CUDA runtime carried: {words} in {', '.join(files)}" for words, files in carried.items()]
    if not carried:
        lines.append("  CUDA runtime carried: none")
    return lines + ["", "detail:"]


def render_text(items: list[Inspected]) -> str:
    """The summary first (a wheel's detail runs to hundreds of lines) when a library was read, then each library."""
    found = summary(items)
    lines = summary_lines(found) if found.read else []
    for item in items:
        lines.append(item.path)
        if item.facts is None:
            lines.append(f"  error: {item.error}")
            continue
        facts = item.facts
        if item.source == "table":
            lines.append("  (from the knowledge table, not read: cross-component symbols only; --deep reads the wheel)")
        lines.append(f"  soname:  {facts.soname or '-'}    ({facts.machine}, {facts.elf_type})")
        lines.append(f"  needed:  {', '.join(facts.needed) or '-'}")
        if facts.rpath:
            lines.append(f"  rpath:   {':'.join(facts.rpath)}")
        if facts.runpath:
            lines.append(f"  runpath: {':'.join(facts.runpath)}")
        for need in provider_needs(facts):
            minimum = f" (needs release >= {need.min_version})" if need.min_version else ""
            lines.append(f"  from {need.file}{minimum}: {', '.join(need.versions)}")
            if need.min_version:
                shown = ", ".join(need.symbols[:4]) + (f", ... {len(need.symbols)} symbols" if len(need.symbols) > 4 else "")
                lines.append(f"      {shown}")
        if facts.version_definitions:
            lines.append(f"  defines: {', '.join(facts.version_definitions)}")
        lines.append(f"  device code: {_device_code(facts)}")
        if facts.fatbin is not None:
            lines += [f"    damaged: {note}" for note in facts.fatbin.damage]
        if facts.cuda_runtime is not None:
            lines.append(f"  CUDA runtime: {_cuda_runtime(facts.cuda_runtime)}")
    return "\n".join(lines) + "\n" if lines else "no ELF files found\n"


def render_json(items: Iterable[Inspected]) -> str:
    libraries = []
    for item in items:
        entry: dict[str, Any] = {"path": item.path, "error": item.error, "source": item.source}
        facts = item.facts
        if facts is not None:
            fatbin = facts.fatbin
            entry.update(
                {
                    "soname": facts.soname,
                    "machine": facts.machine,
                    "type": facts.elf_type,
                    "needed": list(facts.needed),
                    "rpath": list(facts.rpath),
                    "runpath": list(facts.runpath),
                    "needs": [
                        {"file": n.file, "versions": list(n.versions), "symbols": list(n.symbols),
                         "min_version": None if n.min_version is None else str(n.min_version)}
                        for n in provider_needs(facts)
                    ],
                    "defines": list(facts.version_definitions),
                    "build_id": facts.build_id,
                    "device_code": None
                    if fatbin is None
                    else {
                        "sass": list(fatbin.sass),
                        "ptx": [{"target": p.target, "isa": p.isa} for p in fatbin.ptx],
                        "undetermined": list(fatbin.undetermined),
                        "unknown_kinds": [{"kind": k, "count": n} for k, n in fatbin.unknown_kinds],
                        "containers": fatbin.containers,
                        "entries": fatbin.entries,
                        "sections": list(fatbin.sections),
                        "damage": list(fatbin.damage),
                        "toolkit": fatbin.toolkit,
                        "skipped": None if fatbin.skipped is None else skipped_because(fatbin.skipped),
                    },
                    "cuda_runtime": None
                    if facts.cuda_runtime is None
                    else {
                        "linkage": facts.cuda_runtime.linkage,
                        "major": facts.cuda_runtime.major,
                        "release": facts.cuda_runtime.release,
                        "release_from": facts.cuda_runtime.release_from,
                    },
                }
            )
        libraries.append(entry)
    return json.dumps({"schema": SCHEMA, "libraries": libraries}, indent=2) + "\n"
