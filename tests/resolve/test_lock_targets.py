"""Issue 28's targets: every lock target (a host class x a Python) resolved with its own wheel tags,
marker environment and requires-python; several --python-version values, host files of another
machine or an older glibc, and the project's `[tool.cudaresolve] fleet` table.

End to end through `cudaresolve lock` against a small index on 127.0.0.1 (tests/index_server.py)
whose wheels carry the markers torch's metadata uses (`platform_machine == "x86_64"`,
`python_version < "3.11"`), for an empty venv of the interpreter running the tests.
"""

from __future__ import annotations

import json
import platform
import sys
import venv

import pytest
from index_server import make_wheel

from cudaresolve.cli import main
from cudaresolve.env.interpreter import running_target
from cudaresolve.host.facts import HostFacts
from cudaresolve.index.tags import TagOverrides, host_platforms, target_tags
from cudaresolve.output.lock_report import target_words
from cudaresolve.resolve.targets import HostPythons, lock_targets, target_interpreter, target_marker

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the expectations name this machine x86_64")

OWN = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture
def index(server):
    """app needs legacy below Python 3.11 and x86only on x86_64 (as torch's metadata gates its NVIDIA
    wheels), and native, whose 2.0 is built for glibc 2.28 and 1.0 for 2.17, on both machines."""
    wheels = [
        make_wheel("app", "1.0", requires=('legacy; python_version < "3.11"', 'x86only; platform_machine == "x86_64"', "native")),
        make_wheel("legacy", "1.0"),
        make_wheel("x86only", "1.0"),
    ]
    for version, glibc in (("1.0", "2_17"), ("2.0", "2_28")):
        for machine in ("x86_64", "aarch64"):
            wheels.append(make_wheel("native", version, tag=f"py3-none-manylinux_{glibc}_{machine}"))
    for filename, data in wheels:
        server.add(filename, data)
    return server.url + "/simple"


def host_file(directory, name: str, machine: str, glibc) -> str:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HostFacts(system="Linux", machine=machine, glibc=glibc).to_json())
    return str(path)


def lock_json(capsys, empty_python, index, *args):
    """Exit code, and the JSON report (None when the lock failed) and stderr."""
    code = main(["lock", "-q", "--python", empty_python, "--index-url", index, "--json", *args])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


def wheels(report) -> dict[str, str]:
    return {p["name"]: p["wheel"]["filename"] for p in report["packages"]}


# -- end to end --------------------------------------------------------------------------------------


@pytest.mark.usefixtures("hermetic")
def test_a_python_310_target_keeps_what_its_markers_hold_and_says_its_requires_python(capsys, empty_python, index):
    code, report, err = lock_json(capsys, empty_python, index, "app", "--python-version", "3.10")
    assert code == 0, err
    assert "legacy" in wheels(report) and report["requires_python"] == "==3.10.*"
    assert [t["python"] for t in report["targets"]] == ["3.10"]
    code, report, err = lock_json(capsys, empty_python, index, "app", "--python-version", "3.12")
    assert code == 0, err
    assert "legacy" not in wheels(report) and "x86only" in wheels(report) and report["requires_python"] == "==3.12.*"


def test_an_aarch64_host_gets_aarch64_wheels_and_no_x86_only_dependency(capsys, empty_python, index, hermetic):
    gh200 = host_file(hermetic, "gh200.json", "aarch64", "2.28")
    code, report, err = lock_json(capsys, empty_python, index, "app", "--host", gh200)
    assert code == 0, err
    chosen = wheels(report)
    assert "x86only" not in chosen
    assert chosen["native"] == "native-2.0-py3-none-manylinux_2_28_aarch64.whl"
    assert not any("x86_64" in filename for filename in chosen.values())
    assert report["targets"] == [{"machine": "aarch64", "tegra": False, "python": OWN, "glibc": "2.28", "hosts": [gh200], "host_count": 1,
                                  "marker": f'platform_machine == "aarch64" and python_version == "{OWN}"'}]
    assert report["requires_python"] == f"=={OWN}.*"
    # a lock for another machine names it, so an installer here refuses it (uv: "not supported by the lockfile")
    assert report["environments"] == [report["targets"][0]["marker"]]
    _, own, _ = lock_json(capsys, empty_python, index, "app")  # this machine's: no environments
    assert own["environments"] == [], own


def test_an_aarch64_host_of_unknown_glibc_gets_manylinux2014(capsys, empty_python, index, hermetic):
    code, report, err = lock_json(capsys, empty_python, index, "app", "--host", host_file(hermetic, "arm.json", "aarch64", None))
    assert code == 0, err
    assert wheels(report)["native"] == "native-1.0-py3-none-manylinux_2_17_aarch64.whl"


def test_a_glibc_217_host_gets_no_manylinux_2_28_wheel(capsys, empty_python, index, hermetic):
    old = host_file(hermetic, "old.json", "x86_64", "2.17")
    code, report, err = lock_json(capsys, empty_python, index, "app", "--host", old)
    assert code == 0, err
    assert wheels(report)["native"] == "native-1.0-py3-none-manylinux_2_17_x86_64.whl"
    # the same host with this machine's glibc: the newest build
    code, report, err = lock_json(capsys, empty_python, index, "app", "--host", host_file(hermetic, "new.json", "x86_64", "2.36"))
    assert code == 0, err
    assert wheels(report)["native"] == "native-2.0-py3-none-manylinux_2_28_x86_64.whl"


def test_platform_still_overrides_the_hosts_tags(capsys, empty_python, index, hermetic):
    gh200 = host_file(hermetic, "gh200.json", "aarch64", "2.28")
    code, report, err = lock_json(capsys, empty_python, index, "app", "--host", gh200, "--platform", "manylinux_2_17_aarch64")
    assert code == 0, err
    assert wheels(report)["native"] == "native-1.0-py3-none-manylinux_2_17_aarch64.whl"


@pytest.mark.usefixtures("hermetic")
def test_two_python_versions_are_two_targets(capsys, empty_python, index):
    code, report, err = lock_json(capsys, empty_python, index, "app", "--python-version", "3.10", "--python-version", "3.12")
    assert code == 0, err
    assert [t["python"] for t in report["targets"]] == ["3.10", "3.12"]
    marked = {p["name"]: p.get("marker") for p in report["packages"]}
    assert marked == {"app": None, "native": None, "x86only": None, "legacy": 'python_version == "3.10"'}, report
    assert report["environments"] == ['platform_machine == "x86_64" and python_version == "3.10"',
                                      'platform_machine == "x86_64" and python_version == "3.12"'], report
    assert report["requires_python"] == ">=3.10,<3.13", report
    # one value given twice is one target
    code, report, err = lock_json(capsys, empty_python, index, "app", "--python-version", "3.12", "--python-version", "3.12")
    assert code == 0, err
    assert len(report["targets"]) == 1


@pytest.mark.usefixtures("hermetic")
@pytest.mark.parametrize("value", ["3", "3.12.1", "py3.12", "312", ""])
def test_a_python_version_that_is_not_x_y_is_refused(capsys, empty_python, index, value):
    code, _, err = lock_json(capsys, empty_python, index, "app", "--python-version", value)
    assert code == 3
    assert err.strip().endswith(f"--python-version: {value!r} is not a Python version X.Y (e.g. 3.12)") and len(err.splitlines()) == 1


def test_the_explain_report_names_the_target(capsys, empty_python, index, hermetic):
    gh200 = host_file(hermetic, "gh200.json", "aarch64", "2.28")
    assert main(["lock", "-q", "--python", empty_python, "--index-url", index, "app", "--host", gh200, "--explain"]) == 0
    out = capsys.readouterr().out
    assert f"  target aarch64, Python {OWN}, glibc 2.28: {gh200}" in out.splitlines()


@pytest.fixture(scope="module")
def python_with_native(tmp_path_factory):
    """A venv holding native 1.0 (installed as pip would record it)."""
    root = tmp_path_factory.mktemp("native-venv")
    venv.EnvBuilder(with_pip=False).create(root)
    site = root / "lib" / f"python{OWN}" / "site-packages" / "native-1.0.dist-info"
    site.mkdir()
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: native\nVersion: 1.0\n\n")
    (site / "INSTALLER").write_text("pip\n")
    (site / "RECORD").write_text("native-1.0.dist-info/METADATA,,\nnative-1.0.dist-info/INSTALLER,,\nnative-1.0.dist-info/RECORD,,\n")
    return str(root / "bin" / "python")


def test_the_installed_set_counts_only_for_the_interpreters_own_machine_and_python(capsys, python_with_native, index, hermetic):
    def native(*args):
        code, report, err = lock_json(capsys, python_with_native, index, "app", *args)
        assert code == 0, err
        package = next(p for p in report["packages"] if p["name"] == "native")
        return package["wheel"]["filename"], package["why"]["kind"]

    assert native() == ("native-1.0-py3-none-manylinux_2_17_x86_64.whl", "kept")
    assert native("--python-version", OWN) == ("native-1.0-py3-none-manylinux_2_17_x86_64.whl", "kept")
    assert native("--python-version", "3.10" if OWN != "3.10" else "3.12") == ("native-2.0-py3-none-manylinux_2_28_x86_64.whl", "index")
    gh200 = host_file(hermetic, "gh200.json", "aarch64", "2.28")
    assert native("--host", gh200) == ("native-2.0-py3-none-manylinux_2_28_aarch64.whl", "index")


@pytest.mark.skipif(sys.version_info.micro == 0, reason="needs an interpreter past X.Y.0")
def test_the_interpreters_own_python_is_judged_with_its_micro(capsys, empty_python, server, hermetic):
    """requires-python >=X.Y.micro fits the interpreter's own Python, given or not, and not X.Y.0 of another."""
    filename, data = make_wheel("fresh", "1.0")
    server.add(filename, data, requires_python=f">={OWN}.{sys.version_info.micro}")
    for args in ((), ("--python-version", OWN)):
        code, report, err = lock_json(capsys, empty_python, server.url + "/simple", "fresh", *args)
        assert code == 0, err
        assert wheels(report) == {"fresh": filename}


# -- the project's fleet -----------------------------------------------------------------------------


def test_the_projects_fleet_is_locked_when_the_command_names_no_host(capsys, empty_python, index, hermetic):
    host_file(hermetic, "hosts/gh200.json", "aarch64", "2.28")
    (hermetic / "pyproject.toml").write_text('[tool.cudaresolve]\nfleet = [{host = "hosts/gh200.json", python = ["3.12"]}]\n')
    code, report, err = lock_json(capsys, empty_python, index, "app")
    assert code == 0, err
    assert [(t["machine"], t["python"], t["hosts"]) for t in report["targets"]] == [("aarch64", "3.12", ["hosts/gh200.json"])]
    assert report["requires_python"] == "==3.12.*" and "x86only" not in wheels(report)
    # a --python-version on the command line: the fleet is not read, this host is the target
    code, report, err = lock_json(capsys, empty_python, index, "app", "--python-version", "3.10")
    assert code == 0, err
    assert [(t["machine"], t["hosts"]) for t in report["targets"]] == [("x86_64", ["this host"])]


def test_a_fleet_of_two_hosts_and_pythons_is_four_targets(capsys, empty_python, index, hermetic):
    host_file(hermetic, "hosts/h100.json", "x86_64", "2.28")
    host_file(hermetic, "hosts/gh200.json", "aarch64", "2.28")
    (hermetic / "pyproject.toml").write_text(
        '[tool.cudaresolve]\nfleet = [{host = "hosts/h100.json", python = ["3.11", "3.12"]}, {host = "hosts/gh200.json", python = ["3.12"]}]\n'
    )
    code, report, err = lock_json(capsys, empty_python, index, "app")
    assert code == 0, err
    assert [(t["machine"], t["python"]) for t in report["targets"]] == [("aarch64", "3.12"), ("x86_64", "3.11"), ("x86_64", "3.12")], report
    by_name: dict[str, list] = {}
    for p in report["packages"]:
        by_name.setdefault(p["name"], []).append((p.get("marker"), sorted(w["filename"] for w in p["wheels"])))
    # one native entry with a wheel per machine; x86only only where the machine is x86_64
    assert by_name["native"] == [(None, ["native-2.0-py3-none-manylinux_2_28_aarch64.whl", "native-2.0-py3-none-manylinux_2_28_x86_64.whl"])]
    assert [marker for marker, _ in by_name["x86only"]] == ['platform_machine == "x86_64"'], by_name
    assert "legacy" not in by_name


@pytest.mark.parametrize(
    "fleet, message",
    [
        ('fleet = [{host = "hosts/gh200.json", python = ["3.x"]}]', "tool.cudaresolve.fleet[0].python: '3.x' is not a Python version X.Y"),
        ('fleet = [{host = "hosts/gh200.json", python = []}]', "tool.cudaresolve.fleet[0].python: is empty"),
        ('fleet = [{python = ["3.12"]}]', "fleet[0].host"),
        ('fleet = "hosts/gh200.json"', "fleet"),
        ("fleet = []", "tool.cudaresolve.fleet: is empty"),
        ('fleet = [{host = "hosts/missing.json"}]', "tool.cudaresolve.fleet[0].host:"),
        ('fleet = [{host = ""}]', "tool.cudaresolve.fleet[0].host: is empty"),
    ],
)
def test_a_bad_fleet_table_is_refused_naming_the_key(capsys, empty_python, index, hermetic, fleet, message):
    host_file(hermetic, "hosts/gh200.json", "aarch64", "2.28")
    (hermetic / "pyproject.toml").write_text(f"[tool.cudaresolve]\n{fleet}\n")
    code, _, err = lock_json(capsys, empty_python, index, "app")
    assert code == 3
    assert message in err and "pyproject.toml" in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_bad_host_option_is_named_by_itself_not_by_a_fleet_entry(capsys, empty_python, index, hermetic):
    """--driver is read once for the whole command, before the fleet's host files: its error names
    the flag alone, not the first fleet entry it would have been applied to."""
    host_file(hermetic, "hosts/h100.json", "x86_64", "2.28")
    host_file(hermetic, "hosts/gh200.json", "aarch64", "2.28")
    (hermetic / "pyproject.toml").write_text('[tool.cudaresolve]\nfleet = [{host = "hosts/h100.json"}, {host = "hosts/gh200.json"}]\n')
    code, _, err = lock_json(capsys, empty_python, index, "app", "--driver", "abc")
    assert (code, err) == (3, "cudaresolve: error: --driver: 'abc' is not a driver release (expected e.g. 535.104.05)\n")


# -- the pure parts ----------------------------------------------------------------------------------


def _host(machine: str, glibc=None, tegra: bool = False) -> HostFacts:
    return HostFacts(system="Linux", machine=machine, glibc=glibc, tegra=tegra)


def test_hosts_of_one_machine_and_python_are_one_target_with_the_oldest_glibc():
    made = lock_targets([
        HostPythons("a", _host("x86_64", "2.35"), ((3, 11), (3, 12))),
        HostPythons("b", _host("x86_64", "2.28"), ((3, 12),)),
        HostPythons("c", _host("aarch64", "2.34"), ((3, 12), (3, 12))),
        HostPythons("jetson", _host("aarch64", "2.35", tegra=True), ((3, 10),)),
    ])
    assert [(t.machine, t.tegra, t.python, t.glibc, [label for label, _ in t.hosts]) for t in made] == [
        ("aarch64", False, (3, 12), (2, 34), ["c"]),
        ("aarch64", True, (3, 10), (2, 35), ["jetson"]),
        ("x86_64", False, (3, 11), (2, 35), ["a"]),
        ("x86_64", False, (3, 12), (2, 28), ["a", "b"]),
    ]
    assert target_marker(made[0]) == 'platform_machine == "aarch64" and python_version == "3.12"'


def test_hosts_of_one_target_with_the_same_facts_fold_into_one_class_with_their_count():
    """The project's fleet: two host files of one kind, each with its Pythons, and a class of nodes."""
    made = lock_targets([
        HostPythons("hosts/a.json", _host("x86_64", "2.35"), ((3, 11), (3, 12))),
        HostPythons("hosts/b.json", _host("x86_64", "2.35"), ((3, 12),)),
        HostPythons("nodes gpu-1..40 (40)", _host("x86_64", "2.35"), ((3, 12),), 40),
        HostPythons("hosts/old.json", _host("x86_64", "2.28"), ((3, 12),)),
    ])
    assert [(t.python, [label for label, _ in t.hosts], t.host_count) for t in made] == [
        ((3, 11), ["hosts/a.json"], 1),
        ((3, 12), ["hosts/a.json, hosts/b.json, nodes gpu-1..40 (40)", "hosts/old.json"], 43),
    ]
    assert "(43 hosts folded into 2 classes, each resolved once)" in target_words(made[1])


def test_a_host_glibc_that_is_not_a_version_is_refused():
    from cudaresolve.errors import UsageError

    with pytest.raises(UsageError, match=r"^h\.json: glibc 'musl' is not a glibc version"):
        lock_targets([HostPythons("h.json", _host("x86_64", "musl"), ((3, 12),))])


def test_the_targets_marker_environment():
    runner = running_target()
    (other,) = lock_targets([HostPythons("gh200", _host("aarch64", "2.28"), ((3, 10),))])
    markers = target_interpreter(other, runner).marker_environment()
    assert markers is not None
    assert (markers["platform_machine"], markers["python_version"], markers["python_full_version"]) == ("aarch64", "3.10", "3.10.0")
    assert markers["platform_python_implementation"] == "CPython" and markers["implementation_version"] == "3.10.0"
    assert markers["sys_platform"] == "linux"
    own = tuple(int(n) for n in OWN.split("."))
    (same,) = lock_targets([HostPythons("here", _host(platform.machine()), (own,))])  # type: ignore[arg-type]
    assert target_interpreter(same, runner).marker_environment() == runner.marker_environment()


def test_a_hosts_machine_and_glibc_make_its_platform_tags():
    assert host_platforms("aarch64", (2, 28)) == ("manylinux_2_28_aarch64",)
    assert host_platforms("aarch64", None) == ("manylinux2014_aarch64",)
    assert host_platforms("x86_64", (2, 17)) == ("manylinux_2_17_x86_64",)
    assert host_platforms("x86_64", None) == ()  # this machine's own tags
    (target,) = lock_targets([HostPythons("gh200", _host("aarch64", "2.28"), ((3, 12),))])
    interpreter = target_interpreter(target, running_target())
    found = {str(t) for t in target_tags(interpreter, TagOverrides(python_version="3.12", platforms=host_platforms("aarch64", (2, 28))))}
    assert {"cp312-cp312-manylinux_2_28_aarch64", "cp312-cp312-manylinux_2_17_aarch64", "cp312-cp312-manylinux2014_aarch64",
            "py3-none-manylinux_2_28_aarch64"} <= found
    assert "cp312-cp312-manylinux_2_31_aarch64" not in found and not any("x86_64" in tag for tag in found)
