"""A1 (architecture): the pure judgement over what data/arch_probe.sh prints, and the probe
itself run on this machine's own files (python3 and its packages are this host's)."""

from __future__ import annotations

import _ssl
import os
import platform
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imagekit.checks.runner import parse_probe_output, printable
from imagekit.checks.suite import checks_units
from imagekit.datafiles import data_text
from imagekit.profiles import builtin_profiles
from imagekit.requirements import REGISTRY
from imagekit.requirements.platform import (
    ARCH_PROBE,
    CONFIG_ARCH_FACT,
    ELF_MACHINES,
    LIBS_PROBE,
    LibrariesResolve,
    NativeArchitecture,
)

SEED = builtin_profiles()["seed"]
ARM64 = {
    CONFIG_ARCH_FACT: "arm64",
    "elf_files": "3",
    "machine.183": "3",
    "machine.183.0": "/usr/bin/python3.11",
}


def judge(facts):
    return NativeArchitecture.judge(facts, {}, SEED)


def test_an_image_whose_files_all_match_its_config_passes():
    result = judge(ARM64)
    assert result.passed and "3 native files, all aarch64 (config: arm64)" in result.evidence


def test_one_amd64_library_in_an_arm64_image_fails_naming_the_file():
    facts = {
        **ARM64,
        "machine.62": "1",
        "machine.62.0": "/usr/lib/python3/dist-packages/fast/_native.so",
    }
    result = judge(facts)
    assert result.failed
    assert "1 of 4 native files are not aarch64" in result.evidence
    assert "/usr/lib/python3/dist-packages/fast/_native.so (x86-64)" in result.evidence


def test_the_evidence_names_at_most_five_files_and_counts_the_rest():
    facts = {CONFIG_ARCH_FACT: "amd64", "machine.183": "40", "machine.62": "1"}
    facts.update({f"machine.183.{i}": f"/lib/foreign{i}.so" for i in range(10)})
    result = judge(facts)
    assert result.failed and "40 of 41" in result.evidence
    assert result.evidence.count("(aarch64)") == 5


@pytest.mark.parametrize(
    "facts, status",
    [
        ({CONFIG_ARCH_FACT: "arm64", "python3": "none"}, "skip"),
        ({CONFIG_ARCH_FACT: "mips64le", "machine.8": "2"}, "warn"),  # no known ELF machine
        ({CONFIG_ARCH_FACT: "amd64"}, "warn"),  # nothing read
        ({CONFIG_ARCH_FACT: "", "machine.62": "2"}, "warn"),  # a config without one
    ],
)
def test_what_cannot_be_judged_is_said(facts, status):
    assert judge(facts).status == status


@given(st.dictionaries(st.text(max_size=30), st.text(max_size=30), max_size=12))
def test_any_probe_output_is_judged_without_an_exception(facts):
    """The facts are a container's output: a hostile image may print anything."""
    assert judge(facts).status in ("pass", "warn", "fail", "skip")


def test_the_unit_is_a_check_of_its_own_from_the_registry():
    assert NativeArchitecture in REGISTRY
    assert hasattr(checks_units, "check_architecture")


HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine())


def probe_here(probe: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """A probe as `check` runs it (sh -c SCRIPT sh), on this machine: its facts, which must
    end with its `end` line."""
    result = subprocess.run(
        ["/bin/sh", "-c", data_text(probe), "sh"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    facts = {k: v for k, v in parse_probe_output(result.stdout).items() if isinstance(v, str)}
    assert facts.get("end") == "1", result.stdout + result.stderr
    return facts


@pytest.mark.skipif(HOST_ARCH is None, reason="a host architecture the table does not name")
def test_the_probe_reads_this_hosts_files_as_its_own_architecture():
    """The probe itself, on this machine: its python3 and packages are native files."""
    facts = probe_here(ARCH_PROBE)
    native = ELF_MACHINES[HOST_ARCH][0]
    assert int(facts[f"machine.{native}"]) > 0
    assert judge({**facts, CONFIG_ARCH_FACT: HOST_ARCH}).passed
    other = "arm64" if HOST_ARCH == "amd64" else "amd64"
    assert judge({**facts, CONFIG_ARCH_FACT: other}).failed


def _elf(path: Path, machine: int) -> None:
    """An ELF header naming `machine`, all the probe reads of a file."""
    path.write_bytes(b"\x7fELF\x02\x01" + bytes(12) + machine.to_bytes(2, "little") + bytes(44))


def test_the_probe_reads_native_files_by_entry_and_follows_no_link(tmp_path):
    """The walk (issue 39: judged by name and directory entry, so only candidates are opened):
    a foreign .so in site-packages is found and named; a link to a file outside the walked
    trees is not read, a link to a directory is not walked (no loop), and other files are not
    native candidates."""
    venv = tmp_path / "venv"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python3*/site-packages"))
    package = site / "pkg"
    package.mkdir()
    _elf(package / "_foreign.cpython-311-aarch64-linux-gnu.so", 183)
    outside = tmp_path / "outside"
    outside.mkdir()
    _elf(outside / "other.so", 40)
    (package / "linked.so").symlink_to(outside / "other.so")
    (package / "loop").symlink_to(package, target_is_directory=True)
    _elf(package / "notes.txt", 40)  # an ELF named like data: not a candidate
    facts = probe_here(ARCH_PROBE, {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"})
    assert facts["machine.183"] == "1" and "machine.40" not in facts, facts
    assert facts["machine.183.0"] == str(package / "_foreign.cpython-311-aarch64-linux-gnu.so")
    if HOST_ARCH == "amd64":
        verdict = judge({**facts, CONFIG_ARCH_FACT: "amd64"})
        assert verdict.failed and "_foreign.cpython-311" in verdict.evidence, verdict


# --- native-libraries: each library of torch, mpi4py and the ops resolves (libs_probe.sh) ---

OMPI_VARIANT = "/usr/local/lib/python3.11/dist-packages/mpi4py/MPI.openmpi.cpython-311.so"
MPICH_VARIANT = "/usr/local/lib/python3.11/dist-packages/mpi4py/MPI.mpich.cpython-311.so"
OP = "/opt/imagekit/torch-extensions/deepspeed_shm_comm/deepspeed_shm_comm.so"


def libs(*rows: tuple[str, str]) -> dict[str, str]:
    """Probe facts for (path, missing sonames) rows."""
    facts = {"loader": "/lib/ld-linux-aarch64.so.1", "libs": str(len(rows))}
    for index, (path, missing) in enumerate(rows):
        facts[f"lib.{index}"] = path
        if missing:
            facts[f"lib.{index}.missing"] = missing
    return facts


def judge_libs(facts):
    return LibrariesResolve.judge(facts, {}, SEED)


def test_libraries_that_all_resolve_pass():
    result = judge_libs(libs(("/torch/_C.so", ""), (OP, "")))
    assert result.passed and "2 native libraries resolve" in result.evidence


def test_a_library_with_a_missing_soname_fails_naming_both():
    result = judge_libs(libs(("/torch/_C.so", ""), (OP, "libc10.so libtorch_cpu.so")))
    assert result.failed
    assert f"1 of 2 native libraries do not resolve: {OP} (needs libc10.so, libtorch_cpu.so)" in (
        result.evidence
    )


def test_a_library_the_loader_refuses_fails_with_its_words():
    facts = libs((OP, ""))
    facts["lib.0.error"] = "not a dynamic executable"
    result = judge_libs(facts)
    assert result.failed and f"{OP} (not a dynamic executable)" in result.evidence


def test_the_drivers_libraries_come_from_the_node_as_the_profile_names_them():
    facts = libs(("/torch/lib/libtorch_cuda.so", "libcuda.so.1 libnvidia-ml.so.1"))
    result = judge_libs(facts)
    assert result.passed
    assert "left to the NVIDIA container runtime: libcuda.so.1, libnvidia-ml.so.1" in (
        result.evidence
    )
    no_driver = SEED.model_copy(update={"driver_libraries": ()})
    assert LibrariesResolve.judge(facts, {}, no_driver).failed


def test_mpi4py_needs_one_of_its_abi_builds_to_resolve():
    one = judge_libs(libs((OMPI_VARIANT, ""), (MPICH_VARIANT, "libmpi.so.12")))
    assert one.passed and "unused MPI ABI builds left out: 1" in one.evidence
    none = judge_libs(libs((OMPI_VARIANT, "libmpi.so.40"), (MPICH_VARIANT, "libmpi.so.12")))
    assert none.failed and "2 of 2" in none.evidence and "libmpi.so.40" in none.evidence


@pytest.mark.parametrize(
    "facts",
    [{"python3": "none"}, {"loader": "none"}, {"loader": "/lib/ld.so", "libs": "0"}],
)
def test_an_image_without_a_loader_or_libraries_is_skipped(facts):
    assert judge_libs(facts).status == "skip"


@given(
    st.dictionaries(
        st.sampled_from(
            ["libs", "lib.0", "lib.0.missing", "lib.0.error", "lib.1", "loader", "truncated"]
        )
        | st.text(max_size=12),
        st.text(max_size=30),
        max_size=12,
    )
)
def test_any_libs_probe_output_is_judged_without_an_exception(facts):
    assert judge_libs(facts).status in ("pass", "fail", "skip")


def test_the_libraries_unit_is_a_check_from_the_registry():
    assert LibrariesResolve in REGISTRY
    assert hasattr(checks_units, "check_native_libraries")


def _fake_package(root, name: str, library: str, replace: bytes | None = None) -> None:
    """A top-level package `name` holding a copy of one of this host's Python extension
    modules; `replace` renames the soname it needs to one no system has (same length)."""
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    data = Path(library).read_bytes()
    if replace:
        assert replace in data
        data = data.replace(replace, b"libzz" + replace[5:])
    (package / Path(library).name).write_bytes(data)


@pytest.mark.skipif(HOST_ARCH is None, reason="a host architecture the table does not name")
def test_the_libs_probe_runs_this_hosts_loader_and_names_a_missing_soname(tmp_path):
    """The probe itself, on this machine, over packages made of this host's own extension
    modules: one as shipped (it resolves), one needing a soname nothing provides."""
    module = _ssl.__file__  # an extension module that links libssl.so.3
    _fake_package(tmp_path, "torch", module)
    _fake_package(tmp_path, "deepspeed", module, replace=b"libssl.so.3")
    facts = probe_here(LIBS_PROBE, {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path)})
    assert facts.get("libs") == "2", facts
    verdict = judge_libs(facts)
    assert verdict.failed, verdict
    assert f"1 of 2 native libraries do not resolve: {tmp_path}/deepspeed/" in verdict.evidence
    assert "(needs libzzl.so.3)" in verdict.evidence


def test_a_probes_unprintable_characters_never_reach_a_judgement():
    """An image controls what its probe prints: an escape sequence meant for the terminal
    that shows the report is replaced before a unit reads it."""
    facts = parse_probe_output("libs\t1\nlib.0\t/x/\x1b[2J.so\nlib.0.missing\tlibz\x07.so\n")
    facts = {k: v for k, v in facts.items() if isinstance(v, str)}
    verdict = judge_libs(facts)
    assert verdict.failed and "/x/?[2J.so (needs libz?.so)" in verdict.evidence


def test_what_an_image_prints_instead_of_a_probe_reaches_no_terminal():
    """A unit probe that did not reach its end reports the image's output tail; an escape
    sequence there (or a newline, which would break the one-line evidence) becomes `?`."""
    assert printable("boom\x1b]0;owned\x07\nnext") == "boom?]0;owned??next"
