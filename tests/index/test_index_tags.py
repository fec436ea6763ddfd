"""Wheel tags of the target: for the running interpreter exactly packaging's sys_tags(), computed
from what the interpreter says of itself; pip download's overrides; errors that say what to give."""

from __future__ import annotations

import platform
from dataclasses import replace

import pytest
from packaging import tags

from cudaresolve.env.interpreter import running_target
from cudaresolve.errors import UsageError
from cudaresolve.index.tags import TagOverrides, target_tags


def test_the_running_interpreter_gets_exactly_sys_tags():
    assert target_tags(running_target()) == tuple(tags.sys_tags())


def test_an_explicit_manylinux_platform_admits_older_manylinux_tags():
    found = {str(t) for t in target_tags(running_target(), TagOverrides(python_version="3.9", platforms=("manylinux2014_x86_64",)))}
    assert {"cp39-cp39-manylinux_2_17_x86_64", "cp39-cp39-manylinux1_x86_64", "cp39-abi3-manylinux_2_5_x86_64", "py3-none-any"} <= found
    assert not any("manylinux_2_28" in t or "cp311" in t for t in found)


def test_free_threaded_cpython_takes_the_t_abi():
    target = replace(running_target(), version="3.13.1", free_threaded=True)
    assert str(target_tags(target)[0]).startswith("cp313-cp313t-")


def test_other_implementations_need_their_abi():
    with pytest.raises(UsageError, match="give --abi with --implementation pp"):
        target_tags(running_target(), TagOverrides(implementation="pp"))
    pypy = target_tags(running_target(), TagOverrides(implementation="pp", python_version="3.10", abis=("pypy310_pp73",)))
    assert str(pypy[0]).startswith("pp310-pypy310_pp73-")


def test_a_target_of_another_machine_needs_a_platform():
    other = "aarch64" if platform.machine() != "aarch64" else "x86_64"
    with pytest.raises(UsageError, match="give --platform"):
        target_tags(replace(running_target(), machine=other))
