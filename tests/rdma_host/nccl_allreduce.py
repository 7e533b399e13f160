"""One all-reduce over NCCL between the ranks torch.distributed.run started (run.sh step 4)."""

import os

import torch
import torch.distributed as dist

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
tensor = torch.ones(1 << 20, device="cuda") * (rank + 1)
dist.all_reduce(tensor)
expected = sum(range(1, dist.get_world_size() + 1))
print(f"IMAGEKIT_NCCL rank={rank} ok={bool((tensor == expected).all())}", flush=True)
dist.destroy_process_group()
