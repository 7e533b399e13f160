#!/usr/bin/env bash
# On a GPU host with torch and nvcc (no network needed), from the folder prepare.sh filled:
# build the recipe's DeepSpeed with its prebuilt ops the way the image's builder stage does
# (the plan's DS_BUILD_* / TORCH_CUDA_ARCH_LIST environment, no build isolation), then
#  1. run imagekit check's own probes (cuda_probe.py, libs_probe.sh) against it, with a GPU
#     present;
#  2. step FusedAdam on the GPU and DeepSpeedCPUAdam on the CPU against torch's AdamW;
#  3. train E1 (examples/cifar10_deepspeed.py, ZeRO 2) on the GPU over NCCL, fp32 and bf16.
# Stops at the first step that breaks; the verdict (results.json) fails on any wrong answer.
#   run.sh DIR [OUTDIR]
set -euo pipefail
dir=$(cd "$1" && pwd)
out=${2:-$dir}
mkdir -p "$out"
site=/tmp/imagekit-gpu-site
rm -rf "$site" && mkdir -p "$site"
export PYTHONPATH=$site PYTHONUNBUFFERED=1
say() { printf '\n==> %s\n' "$*"; }

say "host"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__,
  "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0),
  "sm", torch.cuda.get_device_capability(0))'
nvcc --version | tail -n 2

say "DeepSpeed's dependencies from the lock (no index)"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$dir"/*.whl

say "DeepSpeed from the lock's sdist, its ops built by pip with the recipe's environment"
cuda_home=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
python3 - "$dir/ds_build_env.json" "$cuda_home" > "$site.env" <<'PYEOF'
import json, shlex, sys
env = json.load(open(sys.argv[1]))
env["CUDA_HOME"] = sys.argv[2]  # this host's toolkit; the image's builder has Debian's at /usr
print("".join(f"export {key}={shlex.quote(value)}\n" for key, value in env.items()))
PYEOF
cat "$site.env"
started=$(date +%s)
# MAX_JOBS=8: the image's build uses 1 (reproducible nvcc temporary names); speed only here.
(
  . "$site.env"
  MAX_JOBS=8 python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
    --target "$site" "$dir"/deepspeed-*.tar.gz 2>&1 | tail -n 30
)
build_s=$(($(date +%s) - started))
python3 -c 'import deepspeed; print("deepspeed", deepspeed.__version__, deepspeed.__file__)'
echo "DeepSpeed and its ops built in ${build_s}s"

say "1. imagekit check's probes (cuda_probe.py, libs_probe.sh), a GPU present"
python3 "$dir/cuda_probe.py" "$(cat "$dir/ops.txt")" | tail -n 1 | tee "$out/probe.json"
sh "$dir/libs_probe.sh" > "$out/libs.txt"
grep -E '^(libs|loader)\b|\.(missing|error)\b' "$out/libs.txt" || true

say "2. optimizer steps on the prebuilt ops"
python3 "$dir/optimizer_steps.py" | tee "$out/optimizer.json"

say "3. E1 on the GPU over NCCL (one rank, ZeRO 2)"
export MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 RANK=0 LOCAL_RANK=0 WORLD_SIZE=1
export DS_ACCELERATOR=cuda
for dtype in fp32 bf16; do
  python3 "$dir/cifar10_deepspeed.py" --deepspeed --epochs 3 --stage 2 --dtype "$dtype" \
    --log-interval 1000 > "$out/e1-$dtype.txt" 2>&1 || true
  grep -E "IMAGEKIT_TRAIN|Error" "$out/e1-$dtype.txt" || tail -n 5 "$out/e1-$dtype.txt"
done

say "verdict"
python3 "$dir/verdict.py" "$out" "$build_s"
