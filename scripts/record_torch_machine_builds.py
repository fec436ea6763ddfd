"""Measure which torch wheels of a machine are CUDA builds: the facts behind data/torch.toml [cuda_member].

Usage: python scripts/record_torch_machine_builds.py [--machine aarch64] [--python cp311] [--json]

Why: the release rows of data/torch.toml describe the default (index) build of x86_64, where every
release is a CUDA build. The registry's aarch64 wheels of torch 2.0.0 ... 2.10.0 hold no
torch/lib/libtorch_cuda.so (CPU-only; every nvidia-* requirement is gated `platform_machine ==
"x86_64"`), those of 2.11.0 and later hold it. The lock reads each wheel's zip directory at lock time
(cudaresolve.index.metadata.wheel_members); this script prints the same facts for every release the
configured index serves, for the table's source line. One row per release: the wheel, its size, the
member count, whether it holds the member, the bytes read, and the first nvidia-* requirement of
its metadata with its marker.

Reads pip's configured index (range reads of each wheel's tail; nothing is downloaded whole).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--machine", default="aarch64")
    parser.add_argument("--python", default="cp311", help="the interpreter tag whose wheels are read")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from cudaresolve.env.interpreter import running_target
    from cudaresolve.index.access import open_index
    from cudaresolve.index.config import IndexSettings, index_config
    from cudaresolve.knowledge import torch as torch_data
    from cudaresolve.resolve.candidates import wheel_machine

    target = running_target()
    config = index_config(target.python, target.prefix, os.environ, None, IndexSettings(), site_packages=target.site_packages)
    member = torch_data.cuda_member()
    rows = []
    with open_index(config, target, os.environ) as index:
        wheels = {}
        for file in index.files("torch"):
            if file.is_wheel and f"-{args.python}-" in file.filename and wheel_machine(file.filename) == args.machine:
                wheels.setdefault(file.version, file)
        for version in sorted(wheels):
            file = wheels[version]
            before = index.http.bytes_received
            names = index.members(file)
            read = index.http.bytes_received - before
            nvidia = next((r for r in index.metadata(file).requires_dist if r.startswith("nvidia-")), None)
            rows.append({"version": str(version), "wheel": file.filename, "size": file.size, "members": len(names),
                         "cuda": member in names, "bytes_read": read, "nvidia_requirement": nvidia})
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    for row in rows:
        size = f"{(row['size'] or 0) / 1e6:.0f} MB"
        held = "holds" if row["cuda"] else "lacks"
        print(f"{row['version']:>8}  {row['wheel']}  {size:>7}  {row['members']:>6} members  {held} {member}  "
              f"read {row['bytes_read'] / 1e6:.1f} MB  {row['nvidia_requirement'] or 'no nvidia-* requirement'}")
    cpu = [r["version"] for r in rows if not r["cuda"]]
    cuda = [r["version"] for r in rows if r["cuda"]]
    print(f"CPU-only on {args.machine}: {', '.join(cpu) or 'none'}")
    print(f"CUDA builds on {args.machine}: {', '.join(cuda) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
