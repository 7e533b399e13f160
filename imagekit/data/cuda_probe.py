"""Run inside an image by `imagekit check` (python3 -c <this file> OPS), once per check, in the
background: what torch says about CUDA and NCCL, do the shared libraries of torch, its
nvidia-* wheels and DeepSpeed's prebuilt ops resolve, and do the ops import? No GPU is
needed. Prints one JSON object. Imports nothing of the image's packages except in one child
process (torch is imported once there, for every fact), so a crash there is reported, not
fatal."""

import glob
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


def missing(lib, loader_path):
    """Libraries `ldd` cannot find for `lib`; loader_path: what is loaded in-process first."""
    env = dict(os.environ)
    if loader_path:
        env["LD_LIBRARY_PATH"] = ":".join(loader_path)
    out = subprocess.run(["ldd", lib], capture_output=True, text=True, env=env).stdout
    return sorted({line.split()[0] for line in out.splitlines() if "not found" in line})


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
    """The child that imports torch (seconds), started first: the ldd runs overlap it."""
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


def main():
    ops = [a for a in sys.argv[1].split(",") if a] if len(sys.argv) > 1 else []
    torch_dir = package_dir("torch")
    if torch_dir is None:
        print(json.dumps({"torch": None}))
        return
    site = os.path.dirname(torch_dir)
    nvidia_libs = sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
    loader_path = [os.path.join(torch_dir, "lib"), *nvidia_libs]
    ds_dir = package_dir("deepspeed")
    child = start_torch_facts(ops, ds_dir)
    groups = {
        "torch": (glob.glob(os.path.join(torch_dir, "lib", "*.so*")), []),
        "nvidia": ([f for d in nvidia_libs for f in glob.glob(os.path.join(d, "*.so*"))], []),
        # Op libraries link libc10/libtorch by name: they load after `import torch`.
        "deepspeed-ops": (
            glob.glob(os.path.join(ds_dir, "ops", "**", "*.so"), recursive=True) if ds_dir else [],
            loader_path,
        ),
        "torch-extensions": (
            glob.glob(
                os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR", "/nonexistent"), "**", "*.so"),
                recursive=True,
            ),
            loader_path,
        ),
    }
    unresolved = {}
    counts = {}
    for group, (libs, path) in groups.items():
        counts[group] = len(libs)
        for lib in sorted(libs):
            if os.path.islink(lib):
                continue
            gone = missing(lib, path)
            if gone:
                unresolved[lib] = gone
    facts = torch_facts(child, ops)
    print(json.dumps({"torch": torch_dir, "counts": counts, "unresolved": unresolved, **facts}))


main()
