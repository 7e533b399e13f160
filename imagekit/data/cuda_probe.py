"""Run inside an image by `imagekit check` (python3 -c <this file> OPS), once per check, in the
background: what torch says about CUDA and NCCL, and does each prebuilt op import? No GPU is
needed. Prints one JSON object. Imports nothing of the image's packages except in one child
process (torch is imported once there, for every fact), so a crash there is reported, not
fatal; and not even there when the packages' generated files say nothing needs importing.
Whether their libraries resolve is A1's `native-libraries` (data/libs_probe.sh)."""

import ast
import importlib.util
import json
import os
import subprocess
import sys


def package_dir(name):
    try:
        spec = importlib.util.find_spec(name)  # does not import the package
    except (ImportError, ValueError):
        return None
    return os.path.dirname(spec.origin) if spec and spec.origin else None


TORCH_FACTS = r"""
import importlib, json, sys
import torch
facts = {"torch_cuda": torch.version.cuda or None, "nccl": None, "ops": {}}
try:  # the NCCL torch really loads (a wheel's, or a system one); CPU torch has none
    facts["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
except Exception:
    pass
wanted = [a for a in sys.argv[2:] if a]
if sys.argv[1] == "deepspeed":
    from deepspeed.accelerator import get_accelerator
    from deepspeed.git_version_info import installed_ops, torch_info
    accel = get_accelerator()
    if not wanted:  # an image imagekit did not build: every op DeepSpeed says it installed
        from deepspeed.ops.op_builder.all_ops import ALL_OPS
        wanted = [type(ALL_OPS[n]).__name__ for n, on in installed_ops.items() if on and n in ALL_OPS]
    for name in wanted:
        try:
            builder = accel.create_op_builder(name)
            if builder is None:
                raise RuntimeError("unknown to this DeepSpeed")
            if not installed_ops.get(builder.NAME):
                raise RuntimeError("not installed (a rank would JIT-compile it, which needs nvcc)")
            builder.validate_torch_version(torch_info)
            if torch.version.cuda:  # the CUDA the ops were built with, checked with no GPU too
                builder.validate_torch_op_version(torch_info)
            importlib.import_module(builder.absolute_name())
            facts["ops"][name] = "ok"
        except BaseException as exc:
            facts["ops"][name] = (type(exc).__name__ + ": " + str(exc)).splitlines()[0][:300]
print(json.dumps(facts))
"""


def start_torch_facts(ops, ds_dir):
    """The child that imports torch (seconds)."""
    env = dict(os.environ, DS_ACCELERATOR="cuda")
    mode = "deepspeed" if ds_dir else "torch"
    return subprocess.Popen(
        [sys.executable, "-c", TORCH_FACTS, mode, *ops],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def torch_facts(child, ops):
    stdout, stderr = child.communicate()
    try:
        return json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (stderr.strip().splitlines() or ["no output"])[-1][:300]
        why = f"python exited {child.returncode}: {tail}"
        return {"torch_cuda": None, "nccl": None, "ops": {op: why for op in ops}}


def literals(path):
    """The top-level `NAME = literal` assignments of a generated module (torch's version.py,
    DeepSpeed's git_version_info_installed.py), read without running it; {} if unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(1_000_000))
    except (OSError, ValueError, SyntaxError):
        return {}
    found = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
            try:
                found[target.id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                pass
    return found


def known_without_import(ops, torch_dir, ds_dir):
    """The facts, when nothing needs importing: no op named, a CPU torch (no NCCL to ask
    for), and a DeepSpeed that installed no op. Importing torch and DeepSpeed costs seconds
    of CPU that the rest of a check then waits for. None when anything must be imported."""
    if ops or literals(os.path.join(torch_dir, "version.py")).get("cuda", "unknown") is not None:
        return None
    if ds_dir:
        installed = literals(os.path.join(ds_dir, "git_version_info_installed.py")).get(
            "installed_ops"
        )
        if not isinstance(installed, dict) or any(installed.values()):
            return None
    return {"torch_cuda": None, "nccl": None, "ops": {}}


def main():
    ops = [a for a in sys.argv[1].split(",") if a] if len(sys.argv) > 1 else []
    torch_dir = package_dir("torch")
    if torch_dir is None:
        print(json.dumps({"torch": None}))
        return
    ds_dir = package_dir("deepspeed")
    facts = known_without_import(ops, torch_dir, ds_dir)
    if facts is None:
        facts = torch_facts(start_torch_facts(ops, ds_dir), ops)
    print(json.dumps({"torch": torch_dir, **facts}))


main()
