#!/usr/bin/env bash
# Gather, on a machine with PyPI, what run.sh needs on a GPU host that has no network: the
# recipe's DeepSpeed-stage files from its lock, built for the GPU host's Python, and the
# recipe's DeepSpeed build environment as imagekit's plan computes it.
#   tests/gpu_host/prepare.sh RECIPE OUTDIR [PYTHON_VERSION]   (default 3.12)
set -euo pipefail
recipe=$1 out=$2 pyver=${3:-3.12}
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
mkdir -p "$out"
"$python" "$here/prepare_inputs.py" "$recipe" "$out"
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$out" -r "$out/wheels.txt"
"$python" -m pip download -q --no-deps --no-binary=:all: --require-hashes -d "$out" \
  -r "$out/sdist.txt"
cp "$here/run.sh" "$here/optimizer_steps.py" "$here/verdict.py" \
  "$here/../../imagekit/data/cuda_probe.py" "$here/../../imagekit/data/libs_probe.sh" \
  "$here/../../examples/cifar10_deepspeed.py" "$out/"
ls -la "$out"
