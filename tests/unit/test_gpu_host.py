"""The GPU-host check's pure parts (tests/gpu_host): what it takes from a recipe and its
lock, and what its verdict counts as a failure. Its run needs a GPU (docs: GPU images without a registry)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "gpu_host" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


prepare_inputs = _load("prepare_inputs")
verdict = _load("verdict")


def test_inputs_are_the_recipes_build_environment_and_its_locked_sdist(tmp_path):
    prepare_inputs.main(str(ROOT / "recipes" / "deepspeed-gpu.yaml"), tmp_path)
    env = json.loads((tmp_path / "ds_build_env.json").read_text())
    assert env["DS_BUILD_FUSED_ADAM"] == env["DS_BUILD_CPU_ADAM"] == "1"
    assert env["DS_BUILD_OPS"] == "0" and env["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0"
    assert (tmp_path / "ops.txt").read_text().split() == ["FusedAdamBuilder,CPUAdamBuilder"]
    lock = (ROOT / "recipes" / "deepspeed-gpu.lock").read_text()
    sdist = (tmp_path / "sdist.txt").read_text().strip()
    name_version, hash_flag = sdist.split(" ")
    assert name_version == "deepspeed==0.19.8"
    assert hash_flag.removeprefix("--hash=sha256:") in lock
    wheels = (tmp_path / "wheels.txt").read_text().split()
    assert "pydantic==2.14.4" in wheels and not any(w.startswith("numpy") for w in wheels)


def test_a_recipe_whose_ops_pip_does_not_build_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="deepspeed-cpu.yaml"):
        prepare_inputs.main(str(ROOT / "recipes" / "deepspeed-cpu.yaml"), tmp_path)


def _good():
    probe = {"unresolved": {}, "torch_cuda": "13.0", "nccl": "2.28.9",
             "ops": {"FusedAdamBuilder": "ok", "CPUAdamBuilder": "ok"}}  # fmt: skip
    optimizer = {"FusedAdam": {"ok": True}, "DeepSpeedCPUAdam": {"ok": True}}
    run = {"first_loss": 2.18, "last_loss": 0.21, "device": "cuda:0", "backend": "nccl"}
    return probe, optimizer, {"fp32": dict(run), "bf16": dict(run)}


def test_the_library_probes_lines_become_the_unresolved_libraries():
    lines = "loader\t/lib64/ld.so\nlibs\t2\nlib.0\t/t/_C.so\nlib.0.missing\t\n"
    lines += "lib.1\t/t/lib/libtorch_cuda.so\nlib.1.missing\tlibcublasLt.so.12 libx.so\nend\t1\n"
    assert verdict.unresolved_libraries(lines) == {
        "/t/lib/libtorch_cuda.so": ["libcublasLt.so.12", "libx.so"]
    }
    assert verdict.unresolved_libraries("lib.0\t/a.so\nlib.0.error\tnot ELF\n") == {
        "/a.so": ["not ELF"]
    }


def test_a_good_run_has_no_failures():
    assert verdict.failures_of(*_good()) == []


@pytest.mark.parametrize(
    "breakage, expected",
    [
        (lambda p, o, e: p["ops"].update(FusedAdamBuilder="ImportError: x"), "op FusedAdamBuilder"),
        (lambda p, o, e: p.update(ops={}), "checked no op"),
        (lambda p, o, e: p.update(nccl=None), "no NCCL"),
        (lambda p, o, e: p.update(unresolved={"a.so": ["libx.so"]}), "unresolved"),
        (lambda p, o, e: o["FusedAdam"].update(ok=False), "optimizer FusedAdam"),
        (lambda p, o, e: e.update(bf16=None), "E1 bf16: no IMAGEKIT_TRAIN"),
        (lambda p, o, e: e["fp32"].update(last_loss=3.0), "E1 fp32: the loss did not go down"),
        (lambda p, o, e: e["fp32"].update(device="cpu", backend="gloo"), "E1 fp32: ran on cpu"),
    ],
)
def test_each_wrong_answer_is_a_failure(breakage, expected):
    probe, optimizer, e1 = _good()
    breakage(probe, optimizer, e1)
    failures = verdict.failures_of(probe, optimizer, e1)
    assert len(failures) == 1 and expected in failures[0], failures
