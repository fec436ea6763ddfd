"""The rule that chooses the survey's stacks from a ranked list of distributions (not part of CI).

Usage: python scripts/survey_choose.py RANKED.tsv N OUT.json

RANKED.tsv has the columns name, version, month, rank, summary (the first line names them). Walking
it by rank, a distribution becomes a stack when
  (a) the Requires-Dist of its newest release (the metadata the configured indexes serve: pip's
      configuration, read by cudaresolve.index as the lock reads it) names an NVIDIA CUDA wheel
      (nvidia-*), cupy*, torch, or a JAX CUDA plugin (jax-cuda*), directly or through an extra
      (the first such extra in the metadata's order is the one installed; extras for tests, docs
      and development are not), or
  (b) its cp311 manylinux x86_64 wheel ships an ELF file whose DT_NEEDED names a CUDA library
      (read by range with cudaresolve's wheel reader).
The bare nvidia-* component wheels are dependencies, not stacks. Only rows whose summary names a
GPU, CUDA or deep-learning word are asked about (PREFILTER): the registry is not walked name by name.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import sys
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.commands.locking import open_indexes
from cudaresolve.env.interpreter import target_for
from cudaresolve.index.wheel_facts import LinkBudget
from cudaresolve.resolve.inputs import Indexes

PREFILTER = re.compile(
    r"cuda|gpu|nvidia|pytorch|torch|jax|cupy|tensorflow|deep.learning|neural|onnx|triton|transformer|"
    r"diffusion|llm|inference|accelerat|language model|vision|kernel",
    re.I,
)
CUDA_WHEEL = re.compile(r"^(nvidia-.*|cupy.*|torch|jax-cuda.*)$")
COMPONENT = re.compile(r"^nvidia-")
NOT_INSTALLED_EXTRA = re.compile(r"^(test|tests|testing|dev|docs?|lint|benchmark)", re.I)
CUDA_LIBRARY = re.compile(r"^lib(cuda|cudart|cublas|cublasLt|nvrtc|cudnn|cufft|curand|cusolver|cusparse|nccl|nvJitLink|"
                          r"nvToolsExt|cupti|nvinfer|cusparseLt|nvshmem|cufile|npp\w*|nvjpeg)\.so")


def cuda_requirement(requires_dist: tuple[str, ...], extras: tuple[str, ...]) -> tuple[str, str | None] | None:
    """(the CUDA requirement, the extra it comes through or None) of the first line that names one for
    Linux x86_64 and Python 3.11: with no extra first, then each extra in turn but those for tests and docs."""
    for extra in (None, *(e for e in extras if not NOT_INSTALLED_EXTRA.match(e))):
        environment = {"extra": extra or "", "sys_platform": "linux", "platform_system": "Linux",
                       "platform_machine": "x86_64", "python_version": "3.11", "python_full_version": "3.11.7"}
        for line in requires_dist:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if not CUDA_WHEEL.match(canonicalize_name(requirement.name)):
                continue
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
            return line, extra
    return None


def choose(ranked: Path, wanted: int, out: Path) -> int:
    target = target_for(python=sys.executable)
    rows = [row for row in csv.DictReader(ranked.open(), delimiter="\t") if row["rank_among_15000_most_downloaded"]]
    rows.sort(key=lambda row: int(row["rank_among_15000_most_downloaded"]))
    chosen: list[dict] = []
    skipped: list[dict] = []
    asked = 0
    with open_indexes(target, Indexes(), os.environ, quiet=True) as index:
        for row in rows:
            name = canonicalize_name(row["name"])
            if len(chosen) >= wanted:
                break
            if COMPONENT.match(name) or not PREFILTER.search(row["summary"] + " " + name):
                continue
            asked += 1
            try:
                files = index.installable(index.files(name))
            except Exception as exc:  # an index that cannot list it: recorded, not a stack
                skipped.append({"name": name, "why": f"index: {exc}"})
                continue
            releases = sorted({f.version for f in files if f.version and not f.yanked and not f.version.is_prerelease})
            if not releases:
                skipped.append({"name": name, "why": "no release installable for cp311 linux x86_64"})
                continue
            newest = releases[-1]
            newest_files = [f for f in files if f.version == newest]
            try:
                metadata = index.metadata(newest_files[0])
            except Exception as exc:
                skipped.append({"name": name, "why": f"metadata: {exc}"})
                continue
            found = cuda_requirement(metadata.requires_dist, metadata.provides_extra)
            how = None
            if found:
                how = {"rule": "a", "requirement": found[0], "extra": found[1]}
            else:
                wheels = [f for f in newest_files if f.is_wheel and "manylinux" in f.filename]
                if wheels:
                    try:
                        facts = index.linked_facts(wheels[0], LinkBudget(2 * 2**30))
                    except Exception as exc:
                        skipped.append({"name": name, "why": f"wheel read: {exc}"})
                        continue
                    linking = sorted({(m.path.split("!", 1)[-1], n) for m in facts.members for n in m.needed
                                      if CUDA_LIBRARY.match(n)})
                    if linking:
                        how = {"rule": "b", "member": linking[0][0], "needed": linking[0][1]}
            if how is None:
                continue
            how["needs_torch"] = _names_torch(metadata.requires_dist, how.get("extra"))
            older = [v for v in releases if _series(v) < _series(newest)]
            chosen.append({
                "rank": int(row["rank_among_15000_most_downloaded"]), "name": name, "newest": str(newest),
                "older": str(older[-1]) if older else None, "summary": row["summary"], **how,
            })
            sys.stderr.write(f"{len(chosen):3} {row['rank_among_15000_most_downloaded']:>5} {name} {newest} {how}\n")
    digest = hashlib.sha256(ranked.read_bytes()).hexdigest()
    out.write_text(json.dumps({"ranked_list": str(ranked), "sha256": digest, "rule": __doc__, "asked": asked,
                               "chosen": chosen, "skipped": skipped}, indent=1))
    return 0


def _names_torch(requires_dist: tuple[str, ...], extra: str | None) -> bool:
    """Whether the release requires torch (with `extra`): its stack is built over the torch base venv."""
    environment = {"extra": extra or ""}
    for line in requires_dist:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) == "torch" and (requirement.marker is None or requirement.marker.evaluate(environment)):
            return True
    return False


def _series(version: Version) -> tuple[int, ...]:
    """The release series an "older release" steps back from: major.minor, or major alone for 0.x-free
    single-number majors (the newest release of the previous series is the older one)."""
    release = version.release + (0,)
    return release[:2]


if __name__ == "__main__":
    sys.exit(choose(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])))
