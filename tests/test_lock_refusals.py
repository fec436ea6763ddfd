"""Refusals name their cause (issue 24): requirements on one name that each fit alone but not
together name both sides with their origins, and a resolution that backtracks past its bound of
time or rounds stops with the conflict it met most. Hermetic indexes on 127.0.0.1."""

from __future__ import annotations

import re

import pytest
from index_server import make_wheel

from cudaresolve.cli import main
from cudaresolve.resolve import resolver


def lock(index_url, python, *args):
    return main(["lock", "-q", "--python", python, "--index-url", index_url, "--driver", "550.144.03", *args])


def test_two_packages_pinning_incompatible_versions_of_a_third_are_both_named(server, empty_python, hermetic, capsys):
    server.add(*make_wheel("a", "1.0", requires=["c==1.0"]))
    server.add(*make_wheel("b", "1.0", requires=["c==2.0"]))
    for version in ("1.0", "2.0"):
        server.add(*make_wheel("c", version))
    assert lock(server.url + "/simple", empty_python, "a", "b", "-o", "pylock.toml") == 2
    err = capsys.readouterr().err
    assert "no release of c fits both: a 1.0 needs c==1.0, b 1.0 needs c==2.0" in err
    assert "nothing fits" not in err  # each fits alone: no side is blamed for the other
    assert not (hermetic / "pylock.toml").exists()


def test_a_request_and_a_dependency_in_conflict_name_the_request_as_a_side(server, empty_python, hermetic, capsys):
    server.add(*make_wheel("a", "1.0", requires=["c==1.0"]))
    for version in ("1.0", "2.0"):
        server.add(*make_wheel("c", version))
    assert lock(server.url + "/simple", empty_python, "a", "c>=2") == 2
    assert "no release of c fits both: the request (command line) needs c>=2, a 1.0 needs c==1.0" in capsys.readouterr().err


@pytest.fixture
def backtracking(server):
    """x 1.0 .. 12.0 each pin z 1.0, y pins z 2.0: every x fails beside y, one backtrack each."""
    for n in range(1, 13):
        server.add(*make_wheel("x", f"{n}.0", requires=["z==1.0"]))
    server.add(*make_wheel("y", "1.0", requires=["z==2.0"]))
    for version in ("1.0", "2.0"):
        server.add(*make_wheel("z", version))
    return server.url + "/simple"


@pytest.mark.parametrize("bound, limit, words", [("MAX_SECONDS", 0, "0 s of resolution"), ("MAX_ROUNDS", 6, "6 resolution rounds")])
def test_a_resolution_stopped_by_its_bound_names_the_conflict_it_met_most(backtracking, empty_python, hermetic, capsys, monkeypatch,
                                                                          bound, limit, words):
    monkeypatch.setattr(resolver, bound, limit)
    assert lock(backtracking, empty_python, "x", "y") == 2
    err = capsys.readouterr().err
    assert re.search(rf"no set found within {words}; the conflict met most: no release of z fits both: "
                     r"(x [\d.]+ needs z==1\.0, y 1\.0 needs z==2\.0|y 1\.0 needs z==2\.0, x [\d.]+ needs z==1\.0)", err), err


def test_without_a_bound_met_the_same_set_is_refused_naming_both_sides(backtracking, empty_python, hermetic, capsys):
    assert lock(backtracking, empty_python, "x", "y") == 2
    err = capsys.readouterr().err
    assert re.search(r"no release of z fits both: (x [\d.]+ needs z==1\.0, y 1\.0 needs z==2\.0|y 1\.0 needs z==2\.0, x [\d.]+ needs z==1\.0)", err), err
