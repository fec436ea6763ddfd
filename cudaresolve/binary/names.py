"""Which files are shared objects by name, one rule for the wheel reader, the scan and the doctor's
result cache (which must find the files the scan reads); nothing imported, so a cached run walks
a tree without loading the binary readers."""

from __future__ import annotations


def is_shared_object_name(name: str) -> bool:
    """`*.so` or `*.so.*` (a substring test: fnmatch was measurably slower on torch's 22k file names)."""
    return name.endswith(".so") or ".so." in name
