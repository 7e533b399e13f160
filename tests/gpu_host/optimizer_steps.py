"""Step DeepSpeed's prebuilt FusedAdam (CUDA kernels, on the GPU) and DeepSpeedCPUAdam (the
CPU op) against torch's own AdamW from the same start, and print one JSON object: for each,
whether its op is the installed (prebuilt) one, the largest parameter difference after ten
steps, and ok. Run by run.sh on a GPU host."""

import json

import torch
from deepspeed.git_version_info import installed_ops
from deepspeed.ops.adam import DeepSpeedCPUAdam, FusedAdam


def compare(make, device: str) -> dict:
    torch.manual_seed(0)
    start = [torch.randn(4096, 257, device=device), torch.randn(1031, device=device)]
    grads = [[torch.randn_like(p) for p in start] for _ in range(10)]
    results = []
    for factory in (make, lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01)):
        params = [torch.nn.Parameter(p.clone()) for p in start]
        opt = factory(params)
        for step in grads:
            for p, g in zip(params, step, strict=True):
                p.grad = g.clone()
            opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        results.append(params)
    diff = max((a - b).abs().max().item() for a, b in zip(*results, strict=True))
    moved = max((a - s).abs().max().item() for a, s in zip(results[0], start, strict=True))
    return {"max_abs_diff": diff, "moved": moved, "ok": diff < 1e-5 and moved > 1e-3}


def main() -> None:
    fused = compare(lambda ps: FusedAdam(ps, lr=1e-3, weight_decay=0.01, adam_w_mode=True), "cuda")
    cpu = compare(
        lambda ps: DeepSpeedCPUAdam(ps, lr=1e-3, weight_decay=0.01, adamw_mode=True), "cpu"
    )
    fused["installed"] = bool(installed_ops.get("fused_adam"))
    cpu["installed"] = bool(installed_ops.get("cpu_adam"))
    fused["ok"] = fused["ok"] and fused["installed"]
    cpu["ok"] = cpu["ok"] and cpu["installed"]
    print(json.dumps({"FusedAdam": fused, "DeepSpeedCPUAdam": cpu}))


if __name__ == "__main__":
    main()
