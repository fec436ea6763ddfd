"""Libraries a framework's import loads count as loaded for the extensions of the packages that
require it: tensorflow's as torch's. tensorflow-text 2.21.1's ops link libtensorflow_framework.so.2
with only a RUNPATH into tensorflow's build tree (`$ORIGIN/../../../_solib_x86_64/...`), so `ldd`
says "not found"; `import tensorflow` has loaded it (tensorflow/python/_pywrap_tensorflow_internal.so
links it, RUNPATH $ORIGIN/../), and ld.so matches a DT_NEEDED to a loaded object by soname.

Hermetic: gcc-built libraries laid out as the two wheels lay theirs out (readelf -d of the real
files, data/components.toml [preloaders]); the oracle is ctypes loading the op after the wrapper,
as the imports do.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_env_distributions import make_dist_info
from test_torch_abi import run

from cudaresolve.checks.findings import Severity
from cudaresolve.output.findings import shown

FRAMEWORK = "int tf_register_op(void) { return 1; }\n"
WRAPPER = "int tf_register_op(void);\nint PyInit__pywrap_tensorflow_internal(void) { return tf_register_op(); }\n"
OP = "int tf_register_op(void);\nint text_op(void) { return tf_register_op() + 1; }\n"
SOLIB = "$ORIGIN/../../../_solib_x86_64/_U_A_Apypi_Utensorflow_S_S_Clibtensorflow_Uframework___Usite-packages_Stensorflow"


def stack(elf_builder, text_requires: tuple[str, ...] = ("tensorflow<2.22,>=2.21.0",)) -> tuple[Path, Path, Path]:
    """site-packages with tensorflow 2.21.0 and tensorflow-text 2.21.1; (site, wrapper, op)."""
    framework = elf_builder.build("libtensorflow_framework.so.2", FRAMEWORK, soname="libtensorflow_framework.so.2",
                                  directory="site/tensorflow")
    wrapper = elf_builder.build("_pywrap_tensorflow_internal.so", WRAPPER, link=[framework], rpath="$ORIGIN/../:$ORIGIN/",
                                directory="site/tensorflow/python")
    op = elf_builder.build("_sentence_breaking_ops.so", OP, link=[framework], rpath=SOLIB,
                           directory="site/tensorflow_text/python/ops")
    site = elf_builder.root / "site"
    make_dist_info(site, "tensorflow", "2.21.0", files=("tensorflow/libtensorflow_framework.so.2",
                                                        "tensorflow/python/_pywrap_tensorflow_internal.so"))
    make_dist_info(site, "tensorflow-text", "2.21.1", files=("tensorflow_text/python/ops/_sentence_breaking_ops.so",),
                   requires=text_requires)
    return site, wrapper, op


ORACLE = "import ctypes, sys\nctypes.CDLL(sys.argv[1])\nprint(ctypes.CDLL(sys.argv[2]).text_op())\n"


def test_tensorflow_text_ops_find_what_importing_tensorflow_loaded(elf_builder, tmp_path):
    site, wrapper, op = stack(elf_builder)
    alone = subprocess.run([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", str(op)],
                           capture_output=True, text=True)
    assert "libtensorflow_framework.so.2: cannot open shared object file" in alone.stderr
    imported = subprocess.run([sys.executable, "-c", ORACLE, str(wrapper), str(op)], capture_output=True, text=True)
    assert imported.stdout == "2\n"
    assert [shown(f) for f in run(site, tmp_path).findings if f.severity != Severity.INFO] == []


def test_without_a_requirement_on_tensorflow_the_op_is_judged_alone(elf_builder, tmp_path):
    """Only a package that imports tensorflow first finds its libraries: one that does not require
    it (and no row says it imports it) cannot open libtensorflow_framework.so.2."""
    site, _, op = stack(elf_builder, text_requires=())
    errors = [f for f in run(site, tmp_path).findings if f.severity == Severity.ERROR]
    assert [(f.subject.distribution, "libtensorflow_framework.so.2" in shown(f).message) for f in errors] == [
        ("tensorflow-text", True)]
