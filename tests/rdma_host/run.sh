#!/usr/bin/env bash
# On a host (or in a pod of the RDMA recipe's image) that has an HCA: what this project's CI
# cannot prove without one (README, "RDMA clusters"). Each step's output goes to OUTDIR, and
# verdict.py judges them all (results.json; exit 1 on any failure):
#  1. ibv_devinfo: at least one port ACTIVE;
#  2. ucx_info -d: UCX sees a verbs transport (rc, ud or dc) on that device;
#  3. ucx_perftest: a two-process tag bandwidth run over RC through the HCA (loopback);
#  4. with a GPU and torch: a two-process NCCL all-reduce with NCCL_DEBUG=INFO, peer-to-peer
#     and shared memory off, so NCCL must take its network transport: IB, never Socket.
#   run.sh OUTDIR [DEVICE]      DEVICE: the HCA port, e.g. mlx5_0:1 (default: the first active)
set -uo pipefail
out=$1
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
say() { printf '\n==> %s\n' "$*"; }

say "1. verbs devices"
ibv_devinfo > "$out/devinfo.txt" 2>&1
cat "$out/devinfo.txt"
device=${2:-$(python3 "$here/verdict.py" --first-active "$out/devinfo.txt")}
echo "device: ${device:-none}"

say "2. UCX transports"
ucx_info -d > "$out/ucx.txt" 2>&1
grep -E 'Transport|Device' "$out/ucx.txt" | sort -u

say "3. UCX tag bandwidth over RC (two processes, loopback through the HCA)"
if [ -n "$device" ]; then
    export UCX_NET_DEVICES=$device UCX_TLS=rc,self
    ucx_perftest -p 13337 > "$out/perftest-server.txt" 2>&1 &
    server=$!
    sleep 2
    ucx_perftest 127.0.0.1 -p 13337 -t tag_bw -s 1048576 -n 2000 > "$out/perftest.txt" 2>&1
    wait "$server"
    tail -n 3 "$out/perftest.txt"
    unset UCX_NET_DEVICES UCX_TLS
fi

if command -v nvidia-smi >/dev/null 2>&1 && python3 -c 'import torch' 2>/dev/null; then
    say "4. NCCL all-reduce, network transport only"
    NCCL_DEBUG=INFO NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 ${device:+NCCL_IB_HCA=$device} \
        python3 -m torch.distributed.run --nproc-per-node 2 "$here/nccl_allreduce.py" \
        > "$out/nccl.txt" 2>&1
    grep -E 'NET/|Using network' "$out/nccl.txt" | sort -u
fi

say "verdict"
python3 "$here/verdict.py" "$out"
