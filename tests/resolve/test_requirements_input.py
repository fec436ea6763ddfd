"""The inputs of `cudaresolve lock`: pip requirements files (compared with what pip reads from the
same files), pyproject.toml dependencies, extras and PEP 735 dependency groups."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest
from index_server import make_wheel
from packaging.version import Version
from test_lock_files import pip_resolves

from cudaresolve.errors import UsageError
from cudaresolve.index.config import IndexSettings
from cudaresolve.resolve.reasons import Asked, Constrained, Need
from cudaresolve.resolve.requirements import (
    RequirementSet,
    from_command_line,
    merge,
    read_project,
    read_requirements_file,
)

DIGEST = "ab" * 32


def _texts(needs: tuple[Need, ...]) -> tuple[str, ...]:
    return tuple(str(need.requirement) for need in needs)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# -- requirements files --------------------------------------------------------------------------


def test_the_format(tmp_path):
    write(tmp_path / "sub" / "more.txt", """\
        # included relative to the including file
        -c ../pins.txt
        helper>=1 ; python_version >= "3"
        """)
    write(tmp_path / "pins.txt", """\
        helper<1.5
        --extra-index-url ${PINS_INDEX}/pins
        """)
    path = write(tmp_path / "requirements.txt", """\
        # a comment
        -i https://index.example.invalid/simple
        --extra-index-url=https://torch.example.invalid/whl/cu130
        --find-links wheels
        -fhttps://links.example.invalid/
        --trusted-host index.example.invalid
        app \\
            >=1.0   # a comment after a continuation
        torch==2.11.0+cu130 \\
            --hash=sha256:%s \\
            --hash sha256:%s
        numpy  ; sys_platform == "linux"  # markers kept
        -r sub/more.txt
        """ % (DIGEST, DIGEST.upper().replace("AB", "CD", 1)))
    (tmp_path / "wheels").mkdir()
    got = read_requirements_file(str(path), environ={"PINS_INDEX": "https://p.example.invalid"})
    assert _texts(got.requirements) == (
        "app>=1.0",
        "torch==2.11.0+cu130",
        'numpy; sys_platform == "linux"',
        'helper>=1; python_version >= "3"',
    )
    assert _texts(got.constraints) == ("helper<1.5",)
    assert got.index_options == IndexSettings(
        index_url="https://index.example.invalid/simple",
        extra_index_urls=("https://torch.example.invalid/whl/cu130", "https://p.example.invalid/pins"),
        find_links=(str(tmp_path / "wheels"), "https://links.example.invalid/"),
        trusted_hosts=("index.example.invalid",),
    )
    assert [need.origin for need in got.requirements] == [Asked(f"{path}:{n}") for n in (7, 9, 12)] + [Asked(f"{tmp_path}/sub/more.txt:3")]
    assert got.constraints[0].origin == Constrained(f"{tmp_path}/sub/../pins.txt:1")


def test_an_unset_variable_is_not_a_valid_name(tmp_path):
    """pip leaves ${UNSET} as written; in a name it then fails to parse, and the error says where."""
    path = write(tmp_path / "r.txt", "${NAME}==1\n")
    assert _texts(read_requirements_file(str(path), environ={"NAME": "pkg"}).requirements) == ("pkg==1",)
    with pytest.raises(UsageError, match=r"r.txt:1: not a valid requirement: '\$\{NAME\}==1'"):
        read_requirements_file(str(path), environ={})


def test_comment_line_ending_in_backslash_continues_nothing(tmp_path):
    path = write(tmp_path / "r.txt", "# note \\\na\nb \\\n\n")
    assert _texts(read_requirements_file(str(path), environ={}).requirements) == ("a", "b")


def test_pep263_coding(tmp_path):
    path = tmp_path / "r.txt"
    body = "pkg==1 ; platform_release != '\xe9'\n".encode("latin-1")
    path.write_bytes(b"# -*- coding: latin-1 -*-\n" + body)
    assert _texts(read_requirements_file(str(path), environ={}).requirements) == ('pkg==1; platform_release != "\xe9"',)
    path.write_bytes(body)  # without the declaration the file is read as UTF-8, which it is not
    with pytest.raises(UsageError, match="r.txt: not utf-8"):
        read_requirements_file(str(path), environ={})


@pytest.mark.parametrize(
    "text, message",
    [
        ("pkg @ https://x.invalid/pkg-1.0-py3-none-any.whl\n", r"r.txt:1: pkg @ https://x.invalid/pkg-1.0-py3-none-any.whl: direct references are not supported yet"),
        ("./wheels/pkg-1.0-py3-none-any.whl\n", r"r.txt:1: ./wheels/pkg-1.0-py3-none-any.whl: direct references \(URLs and paths\) are not supported yet"),
        ("https://x.invalid/pkg.zip\n", r"r.txt:1: https://x.invalid/pkg.zip: direct references"),
        ("-e ./project\n", r"r.txt:1: -e ./project: editable installs are not locked"),
        ("--editable=git+https://x.invalid/p.git\n", r"r.txt:1: --editable git\+https://x.invalid/p.git: editable installs are not locked"),
        ("a\n--frobnicate\n", r"r.txt:2: unknown option --frobnicate"),
        ("--pre\n", r"r.txt:1: pip option --pre is not supported by cudaresolve lock"),
        ("pkg --only-binary=:all:\n", r"r.txt:1: pip option --only-binary is not supported"),
        ("pkg -i https://x.invalid/simple\n", r"r.txt:1: -i must be on its own line"),
        ("--hash=sha256:%s\n" % DIGEST, r"r.txt:1: --hash belongs on a requirement's line"),
        ("pkg==1 --hash=md5:0123\n", r"r.txt:1: --hash=md5:0123: only sha256 hashes are supported"),
        ("pkg==1 --hash=sha256:abc\n", r"r.txt:1: --hash=sha256:abc: not a sha256 hex digest"),
        ("--index-url\n", r"r.txt:1: --index-url needs a value"),
        ("--no-index=yes\n", r"r.txt:1: --no-index takes no value"),
        ("\n\npkg=>1\n", r"r.txt:3: not a valid requirement: 'pkg=>1'"),
        ("pkg ; os_name ==\n", r"r.txt:1: not a valid requirement"),
        ("-r missing.txt\n", r"cannot read .*missing.txt"),
        ("-r https://x.invalid/r.txt\n", r"r.txt:1: -r https://x.invalid/r.txt: remote requirements files are not supported"),
        ("-c c.txt\n", r"c.txt:1: pkg\[gpu\]<2: a constraint cannot name extras"),
        ("-c c2.txt\n", r"c2.txt:1: -e ./x: editable installs are not locked"),
    ],
)
def test_refused_lines_name_file_and_line(tmp_path, text, message):
    write(tmp_path / "c.txt", "pkg[gpu]<2\n")
    write(tmp_path / "c2.txt", "-e ./x\n")
    path = write(tmp_path / "r.txt", text)
    with pytest.raises(UsageError, match=message) as error:
        read_requirements_file(str(path), environ={})
    assert "\n" not in str(error.value)


def test_include_cycles_are_errors(tmp_path):
    write(tmp_path / "a.txt", "x\n-r sub/b.txt\n")
    write(tmp_path / "sub" / "b.txt", "-c ../a.txt\n")
    with pytest.raises(UsageError, match=r"b.txt:1: -c ../a.txt: files include each other \(.*a.txt -> .*b.txt -> .*a.txt\)"):
        read_requirements_file(str(tmp_path / "a.txt"), environ={})
    write(tmp_path / "self.txt", "-r self.txt\n")
    with pytest.raises(UsageError, match="files include each other"):
        read_requirements_file(str(tmp_path / "self.txt"), environ={})


def test_an_include_chain_past_the_depth_limit_is_an_error_not_a_recursion(tmp_path):
    for i in range(1200):
        (tmp_path / f"r{i}.txt").write_text(f"-r r{i + 1}.txt\n")
    (tmp_path / "r1200.txt").write_text("pkg\n")
    with pytest.raises(UsageError, match=r"^.*r99.txt:1: -r r100.txt: files include files more than 100 deep$"):
        read_requirements_file(str(tmp_path / "r0.txt"), environ={})
    # Just within the limit, the chain is read.
    assert _texts(read_requirements_file(str(tmp_path / "r1101.txt"), environ={}).requirements) == ("pkg",)


def test_includes_read_again_and_again_are_bounded(tmp_path):
    # Ten files each including the next one ten times: 10**10 reads without a bound.
    for i in range(10):
        (tmp_path / f"f{i}.txt").write_text(f"-r f{i + 1}.txt\n" * 10)
    (tmp_path / "f10.txt").write_text("pkg\n")
    with pytest.raises(UsageError, match=r"more than 1000 requirements files read through -r/-c"):
        read_requirements_file(str(tmp_path / "f0.txt"), environ={})


@pytest.mark.parametrize(
    "data, message",
    [
        # pip's coding-cookie rule (PEP 263) lets the file name any codec, including one that fails
        # with a plain UnicodeError.
        (b"# coding: undefined\npkg\n", r"r.txt: not undefined \(decoding with 'undefined' codec failed"),
        (b"# -*- coding: no-such-codec -*-\npkg\n", r"r.txt: unknown encoding 'no-such-codec'"),
        (b"pkg\n\xff\n", r"r.txt: not utf-8 \('utf-8' codec can't decode byte 0xff"),
        (b"pkg\nother\0\n", r"r.txt:2: a NUL character: not a text file"),
        # the path raw_unicode_escape decodes holds a lone surrogate, which no file name can
        (b"# coding: raw_unicode_escape\n-r \\ud800.txt\n", r"r.txt:2: cannot read .*: not a valid path"),
        (b"pkg==1." + b"9" * 5000 + b"\n", r"r.txt:1: not a valid requirement: 'pkg==1.999+\.\.\. \(Exceeds the limit \(4300 digits\)"),
        (b"pkg; " + b"(" * 3000 + b"os_name == 'posix'" + b")" * 3000 + b"\n", r"r.txt:1: not a valid requirement: .pkg; \(+\.\.\. \(.*nested"),
    ],
)
def test_undecodable_or_unreadable_files_are_one_line_errors(tmp_path, data, message):
    (tmp_path / "r.txt").write_bytes(data)
    with pytest.raises(UsageError, match=message) as error:
        read_requirements_file(str(tmp_path / "r.txt"), environ={})
    assert "\n" not in str(error.value) and len(str(error.value)) < 400


def test_a_long_run_of_spaces_is_read_in_linear_time(tmp_path):
    # pip's comment expression (^|\s+)#.*$ backtracks quadratically here: ~10**10 steps.
    (tmp_path / "r.txt").write_text(" " * 200_000 + "pkg  # a comment\n" + "\t" * 200_000 + "#\n")
    assert _texts(read_requirements_file(str(tmp_path / "r.txt"), environ={}).requirements) == ("pkg",)


def test_a_file_included_twice_is_no_cycle(tmp_path):
    write(tmp_path / "common.txt", "c==1\n")
    write(tmp_path / "a.txt", "-r common.txt\na\n")
    path = write(tmp_path / "r.txt", "-r a.txt\n-r common.txt\n-c common.txt\n")
    got = read_requirements_file(str(path), environ={})
    assert _texts(got.requirements) == ("c==1", "a") and _texts(got.constraints) == ("c==1",)


def test_no_index(tmp_path):
    path = write(tmp_path / "r.txt", "--no-index\n--find-links /srv/wheels\npkg\n")
    assert read_requirements_file(str(path), environ={}).index_options == IndexSettings(no_index=True, find_links=("/srv/wheels",))


# -- pip reads the same file ---------------------------------------------------------------------


@pytest.fixture
def wheel_dir(tmp_path):
    directory = tmp_path / "wheels"
    directory.mkdir()
    for name, versions in {"alpha": ["1.0", "1.5", "2.0"], "beta": ["0.9", "1.0", "1.1"], "gamma": ["3.0", "3.1"], "delta": ["1.0"]}.items():
        for version in versions:
            filename, data = make_wheel(name, version)
            (directory / filename).write_bytes(data)
    return directory


def _expected(requirement_set: RequirementSet, available: dict[str, list[str]]) -> dict[str, str]:
    """What a resolver must pick from `available` (no dependencies between them): the newest version
    each requirement and every constraint on its name allow, for requirements whose marker holds."""
    picks = {}
    constraints = [need.requirement for need in requirement_set.constraints]
    for need in requirement_set.requirements:
        requirement = need.requirement
        if requirement.marker and not requirement.marker.evaluate():
            continue
        specifiers = [requirement.specifier] + [c.specifier for c in constraints if c.name == requirement.name]
        fitting = [v for v in available[requirement.name] if all(s.contains(v, prereleases=True) for s in specifiers)]
        picks[requirement.name] = str(max(fitting, key=Version))
    return picks


def test_pip_reads_the_file_as_we_do(tmp_path, wheel_dir, monkeypatch):
    write(tmp_path / "deep" / "more.txt", """\
        beta !=1.1 \\
          , >=0.9   # continued, then a comment
        -c ../constraints.txt
        """)
    write(tmp_path / "constraints.txt", "beta<1.1\nalpha<2 ; python_version >= '3'\n")
    path = write(tmp_path / "requirements.txt", """\
        # index options pip honours from the file
        --no-index
        --find-links ${WHEELS_DIR}
        alpha
        # a comment ending in a backslash continues nothing, for pip too \\
        gamma==3.0 ; python_version >= "3"  # a marker that holds
        delta ; python_version < "3"
        -r deep/more.txt
        """)
    ours = read_requirements_file(str(path), environ={"WHEELS_DIR": str(wheel_dir)})
    available = {"alpha": ["1.0", "1.5", "2.0"], "beta": ["0.9", "1.0", "1.1"], "gamma": ["3.0", "3.1"], "delta": ["1.0"]}
    expected = _expected(ours, available)
    assert expected == {"alpha": "1.5", "beta": "1.0", "gamma": "3.0"}
    assert ours.index_options.no_index and ours.index_options.find_links == (str(wheel_dir),)
    monkeypatch.setenv("WHEELS_DIR", str(wheel_dir))
    assert pip_resolves(tmp_path, "-r", str(path)) == expected


def test_hashes_are_checked_and_pip_reads_the_file_alike(tmp_path, wheel_dir):
    """A sha256 is read and checked for its form, not kept: the lock pins the sha256 of the file it
    chose from the index. pip reads the same file to the same requirement."""
    good = hashlib.sha256((wheel_dir / "alpha-1.0-py3-none-any.whl").read_bytes()).hexdigest()
    path = write(tmp_path / "r.txt", f"--no-index\n--find-links {wheel_dir}\nalpha==1.0 \\\n  --hash=sha256:{'0' * 64} \\\n  --hash=sha256:{good}\n")
    assert _texts(read_requirements_file(str(path), environ={}).requirements) == ("alpha==1.0",)
    assert pip_resolves(tmp_path, "-r", str(path)) == {"alpha": "1.0"}  # either listed hash is enough, for pip too


# -- pyproject.toml ------------------------------------------------------------------------------

PYPROJECT = """\
    [project]
    name = "My_Project"
    version = "1.0"
    dependencies = ["numpy>=2", "cuda-pathfinder; sys_platform == 'linux'"]

    [project.optional-dependencies]
    GPU = ["cupy-cuda12x>=13"]
    test = ["pytest>=8"]
    all = ["my-project[gpu]; python_version >= '3.10'", "my.project[test]"]

    [dependency-groups]
    lint = ["ruff"]
    Dev = [{include-group = "lint"}, "mypy", "my-project[gpu]"]
    loop-a = [{include-group = "loop-b"}]
    loop-b = [{include-group = "loop-a"}]
    """


def test_project_dependencies_extras_and_groups(tmp_path):
    write(tmp_path / "pyproject.toml", PYPROJECT)
    assert _texts(read_project(str(tmp_path)).requirements) == ("numpy>=2", 'cuda-pathfinder; sys_platform == "linux"')
    got = read_project(str(tmp_path), extras=["gpu"], groups=["dev"])
    assert _texts(got.requirements) == ("numpy>=2", 'cuda-pathfinder; sys_platform == "linux"', "cupy-cuda12x>=13", "ruff", "mypy")
    assert got.constraints == () and got.requirements[-1].origin == Asked(f"{tmp_path / 'pyproject.toml'}: dependency-groups.Dev[1]")


def test_self_references_expand_with_their_markers(tmp_path):
    write(tmp_path / "pyproject.toml", PYPROJECT)
    got = read_project(str(tmp_path), extras=["all"]).requirements
    assert _texts(got) == (
        "numpy>=2",
        'cuda-pathfinder; sys_platform == "linux"',
        'numpy>=2; python_version >= "3.10"',
        'cuda-pathfinder; sys_platform == "linux" and python_version >= "3.10"',
        'cupy-cuda12x>=13; python_version >= "3.10"',
        "pytest>=8",
    )
    assert not [r for r in _texts(got) if r.startswith("my")]
    path = tmp_path / "pyproject.toml"
    assert [need.origin.where for need in got][2:4] == [f"{path}: project.dependencies[0]", f"{path}: project.dependencies[1]"]
    assert got[4].origin.where == f"{path}: project.optional-dependencies.GPU[0]"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"extras": ["cuda"]}, r"pyproject.toml: unknown extra 'cuda' \(known: GPU, all, test\)"),
        ({"groups": ["docs"]}, r"pyproject.toml: unknown dependency group 'docs' \(known: Dev, lint, loop-a, loop-b\)"),
        ({"groups": ["loop-a"]}, r"pyproject.toml: dependency-groups include themselves \(loop-a -> loop-b -> loop-a\)"),
    ],
)
def test_project_errors(tmp_path, kwargs, message):
    write(tmp_path / "pyproject.toml", PYPROJECT)
    with pytest.raises(UsageError, match=message):
        read_project(str(tmp_path), **kwargs)


@pytest.mark.parametrize(
    "text, kwargs, message",
    [
        ('[project]\nname = "p"\ndependencies = ["ok", "bad name"]\n', {}, r"pyproject.toml: project.dependencies\[1\]: not a valid requirement: 'bad name'"),
        ('[project]\nname = "p"\n[project.optional-dependencies]\nx = ["a @ https://x.invalid/a.whl"]\n', {"extras": ["x"]}, r"project.optional-dependencies.x\[0\]: a @ https://x.invalid/a.whl: direct references are not supported yet"),
        ('[dependency-groups]\ng = ["a", {include = "h"}]\n', {"groups": ["g"]}, r"dependency-groups.g\[1\] must be a requirement string or \{include-group"),
        ('[dependency-groups]\ng = ["a>"]\n', {"groups": ["g"]}, r"dependency-groups.g\[0\]: not a valid requirement"),
        ('[project]\nname = "p"\ndynamic = ["dependencies"]\n', {}, r"project.dependencies is dynamic"),
        ('[project]\nname = "p"\ndependencies = "numpy"\n', {}, r"project.dependencies must be an array of strings"),
        ('[tool.x]\n', {}, r"pyproject.toml: has no \[project\] table"),
        ('[project\n', {}, r"pyproject.toml: not valid TOML"),
        # tomllib lets a RecursionError and int()'s ValueError through: both were tracebacks.
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", {}, r"pyproject.toml: not valid TOML \(nested too deeply\)$"),
        ("x = " + "9" * 5000 + "\n", {}, r"pyproject.toml: not valid TOML \(Exceeds the limit \(4300 digits\) for integer string conversion: value has 5000 digits\)$"),
        ('[project]\nname = "me"\n[project.optional-dependencies]\n' + "".join(f'e{i} = ["me[e{i + 1}]"]\n' for i in range(3000)),
         {"extras": ["e0"]}, r"extras name the project itself more than 50 deep$"),
        ('[dependency-groups]\n' + "".join(f'g{i} = [{{include-group = "g{i + 1}"}}]\n' for i in range(3000)),
         {"groups": ["g0"]}, r"dependency-groups include groups more than 50 deep$"),
    ],
)
def test_project_refusals_name_the_key(tmp_path, text, kwargs, message):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(UsageError, match=message) as error:
        read_project(str(tmp_path), **kwargs)
    assert "\n" not in str(error.value)


def test_groups_without_a_project_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[dependency-groups]\ntools = ["ruff>=0.5"]\n')
    assert _texts(read_project(str(tmp_path), groups=["TOOLS"]).requirements) == ("ruff>=0.5",)


def test_missing_pyproject(tmp_path):
    with pytest.raises(UsageError, match="cannot read .*pyproject.toml"):
        read_project(str(tmp_path))


# -- putting inputs together ---------------------------------------------------------------------


def test_command_line_and_merge(tmp_path):
    first = write(tmp_path / "a.txt", "-i https://one.example.invalid/simple\n--extra-index-url https://x.example.invalid\na==1 --hash=sha256:%s\n" % DIGEST)
    second = write(tmp_path / "b.txt", "-i https://two.example.invalid/simple\na==1 --hash=sha256:%s\n-c c.txt\n" % ("cd" * 32))
    write(tmp_path / "c.txt", "b<2\n")
    merged = merge([read_requirements_file(str(first), environ={}), read_requirements_file(str(second), environ={}), from_command_line(["torch>=2", "a==1"])])
    assert _texts(merged.requirements) == ("a==1", "torch>=2") and _texts(merged.constraints) == ("b<2",)
    assert merged.index_options.index_url == "https://two.example.invalid/simple"  # the later one, as in pip
    assert merged.index_options.extra_index_urls == ("https://x.example.invalid",)
    assert [need.origin for need in merged.requirements] == [Asked(f"{first}:3"), Asked("command line")]
    assert merged.constraints[0].origin == Constrained(f"{tmp_path / 'c.txt'}:1")
    with pytest.raises(UsageError, match=r"command line: 'torch >=': not a valid requirement"):
        from_command_line(["torch >="])
