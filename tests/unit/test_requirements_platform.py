"""A1 (architecture): the pure judgement over what data/arch_probe.sh prints, and the probe
itself run on this machine's own files (python3 and its packages are this host's)."""

from __future__ import annotations

import platform
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imagekit.checks.runner import parse_probe_output
from imagekit.checks.suite import checks_units
from imagekit.datafiles import data_text
from imagekit.profiles import builtin_profiles
from imagekit.requirements import REGISTRY
from imagekit.requirements.platform import (
    ARCH_PROBE,
    CONFIG_ARCH_FACT,
    ELF_MACHINES,
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


@pytest.mark.skipif(HOST_ARCH is None, reason="a host architecture the table does not name")
def test_the_probe_reads_this_hosts_files_as_its_own_architecture():
    """The probe itself, on this machine: its python3 and packages are native files."""
    result = subprocess.run(
        ["/bin/sh", "-c", data_text(ARCH_PROBE), "sh"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    facts = parse_probe_output(result.stdout)
    assert facts.get("end") == "1", result.stdout + result.stderr
    facts = {k: v for k, v in facts.items() if isinstance(v, str)}
    native = ELF_MACHINES[HOST_ARCH][0]
    assert int(facts[f"machine.{native}"]) > 0
    assert judge({**facts, CONFIG_ARCH_FACT: HOST_ARCH}).passed
    other = "arm64" if HOST_ARCH == "amd64" else "amd64"
    assert judge({**facts, CONFIG_ARCH_FACT: other}).failed
