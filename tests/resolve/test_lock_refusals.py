"""Refusals name their cause (issue 24): requirements on one name that each fit alone but not
together name both sides with their origins, and a resolution that backtracks past its bound of
time or rounds stops with the conflict it met most. Every refusal here is a few short lines, its
cause first (conftest.short_refusals). Hermetic indexes on 127.0.0.1."""

from __future__ import annotations

import re

import pytest
from index_server import make_wheel

from cudaresolve.cli import main
from cudaresolve.resolve import resolver

pytestmark = pytest.mark.usefixtures("short_refusals")


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


# -- a refusal a person reads ------------------------------------------------------------------------


def test_cccl_cu13_on_pascal_says_the_gpu_first_in_a_few_short_lines(cuda_index, empty_python, hermetic, capsys, short_refusals):
    """CUDA 13 builds no code for Pascal: the refusal says so first and once, then the conflicts that
    follow, each requirement as it applies (no raw marker); --explain prints the whole record on stdout."""
    from cudaresolve.knowledge import toolkits

    code = main(["lock", "-q", "cuda-cccl[cu13]", "--python", empty_python, "--index-url", cuda_index.index_url,
                 "--torch-index-base", cuda_index.torch_index_base, "--driver", "580.65.06", "--gpu", "6.1", "--explain"])
    assert code == 2
    captured = capsys.readouterr()
    newest = [t.version for t in toolkits.known() if t.major == 13 and t.sass_targets][-1]
    lines = captured.err.splitlines()
    assert lines[0] == f"cudaresolve: error: CUDA 13 is not tried: CUDA {newest} builds no code for GPU 0 (6.1)"
    assert len(short_refusals) == 1 and all("is not tried" not in line for line in lines[1:])
    assert "platform_machine" not in captured.err + captured.out and "extra ==" not in captured.err + captured.out
    assert captured.out.startswith(lines[0].removeprefix("cudaresolve: error: ") + "\n")
    assert "nothing fits nvidia-cuda-runtime==13.2.86.* (required by cuda-toolkit 13.2.2)" in captured.out


def test_a_refusal_of_many_causes_is_five_short_lines_and_explain_keeps_them_all():
    """Eight requirements in conflict, each with long reasons: four lines and a count; the whole
    record has every line and every reason in full."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    from cudaresolve.output.lock_words import no_solution
    from cudaresolve.resolve.causes import Attempt, NoSolution, Unsatisfiable
    from cudaresolve.resolve.reasons import Asked, CandidateRef, Rejection, RequiresPython

    def unsatisfiable(n: int) -> Unsatisfiable:
        name = f"package-with-a-rather-long-name-{n}"
        set_aside = tuple(Rejection(CandidateRef(canonicalize_name(name), Version(f"{m}.0")), RequiresPython(">=3.99,<4")) for m in range(9))
        return Unsatisfiable(Requirement(f'{name}>=1; python_version >= "3"'), Asked("command line"), set_aside)

    failed = NoSolution((Attempt(12, tuple(unsatisfiable(n) for n in range(8))),))
    short = f"cudaresolve: error: {no_solution(failed)}".splitlines()
    assert len(short) == 5 and all(len(line) <= 200 for line in short), short
    assert short[-1] == "and 4 more (--explain or --json: every one)"
    assert 'python_version' not in "\n".join(short)
    whole = no_solution(failed, whole=True).splitlines()
    assert len(whole) == 8 and all(line.count("requires Python >=3.99,<4") == 9 for line in whole)


def test_a_search_that_ran_out_still_says_first_the_major_the_gpu_refuses():
    """A resolution for CUDA 12 that runs out of time on `cuda-cccl[cu13]`'s CUDA 13 pins met builds of
    CUDA 13 set aside: the refusal starts with why CUDA 13 is not tried on a Pascal GPU, as it does when
    the same conflict is found whole."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    from cudaresolve.arch import ComputeCapability
    from cudaresolve.host.facts import Driver, Gpu, HostFacts
    from cudaresolve.resolve.causes import Attempt, Bound, TooDeep, Unsatisfiable
    from cudaresolve.resolve.reasons import Asked, CandidateRef, OtherMajor, Rejection
    from cudaresolve.versions import DriverRelease

    runtime = CandidateRef(canonicalize_name("nvidia-cuda-runtime"), Version("13.0.96"))
    met = Unsatisfiable(Requirement("nvidia-cuda-runtime==13.0.96.*"), Asked("command line"),
                        (Rejection(runtime, OtherMajor(13, 12)),))
    host = HostFacts("Linux", "x86_64", Driver(DriverRelease.parse("580.65.06"), "override:--driver"),
                     (Gpu(ComputeCapability(6, 1), "override:--gpu", 0),))
    ran_out = [Attempt(12, (TooDeep(8, Bound.SECONDS, (met,)),))]
    assert [r.major for r in resolver._untried(ran_out, [("host", host)], [12, 11])] == [13]
    assert resolver._untried([Attempt(12, (TooDeep(8, Bound.SECONDS),))], [("host", host)], [12, 11]) == ()
