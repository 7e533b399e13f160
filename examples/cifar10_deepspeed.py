#!/usr/bin/env python3
"""CIFAR-10 with DeepSpeed under mpirun, in the shape of DeepSpeedExamples'
training/cifar/cifar10_deepspeed.py (same arguments), on synthetic CIFAR-shaped data so
nothing is downloaded. DeepSpeed is a library here, not a launcher (L12): start it with
`mpirun -np N python3 cifar10_deepspeed.py --deepspeed ...`; ranks come from Open MPI's
environment (auto MPI discovery), as on the platform (E1).

Each rank prints one `IMAGEKIT_TRAIN {...}` line at the end: rank, host, first/last loss.
"""

from __future__ import annotations

import argparse
import json
import os
import socket

import deepspeed
import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="CIFAR-10 (synthetic) with DeepSpeed")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--stage", type=int, default=0, choices=[0, 1, 2, 3], help="ZeRO stage")
    parser.add_argument("--dtype", default="fp32", choices=["fp16", "bf16", "fp32"])
    parser.add_argument("--log-interval", type=int, default=100)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--gradient-accumulation-steps", type=int, default=1)
    parser.add_argument("--samples", type=int, default=512, help="synthetic images per epoch")
    parser.add_argument("--local_rank", type=int, default=-1, help="set by launchers; unused")
    parser = deepspeed.add_config_arguments(parser)
    return parser.parse_args()


class Net(nn.Module):
    """The example's small CNN."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def synthetic_cifar(samples: int, rank: int, world: int) -> torch.utils.data.TensorDataset:
    """CIFAR-shaped (3x32x32, 10 classes) with a learnable class signal; each rank its shard."""
    gen = torch.Generator().manual_seed(1234)
    labels = torch.randint(0, 10, (samples,), generator=gen)
    prototypes = torch.randn(10, 3, 32, 32, generator=gen)
    images = prototypes[labels] + 0.8 * torch.randn(samples, 3, 32, 32, generator=gen)
    return torch.utils.data.TensorDataset(images[rank::world], labels[rank::world])


def ds_config(args: argparse.Namespace) -> dict:
    if args.dtype == "fp16" and not torch.cuda.is_available():
        raise SystemExit("--dtype fp16 needs a GPU; use bf16 or fp32 on CPU")
    return {
        "train_micro_batch_size_per_gpu": args.micro_batch_size,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "steps_per_print": 10**9,
        "zero_optimization": {"stage": args.stage},
        "bf16": {"enabled": args.dtype == "bf16"},
        "fp16": {"enabled": args.dtype == "fp16"},
    }


def main() -> None:
    args = parse_args()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=True)
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    engine, _, loader, _ = deepspeed.initialize(
        args=args, model=model, optimizer=optimizer,
        training_data=synthetic_cifar(args.samples, rank, world), config=ds_config(args),
    )
    dtype = {"bf16": torch.bfloat16, "fp16": torch.half}.get(args.dtype, torch.float32)
    epoch_losses = []
    for epoch in range(args.epochs):
        total, count = 0.0, 0
        for step, (images, labels) in enumerate(loader):
            images = images.to(engine.device, dtype=dtype)
            loss = F.cross_entropy(engine(images).float(), labels.to(engine.device))
            engine.backward(loss)
            engine.step()
            total, count = total + loss.item(), count + 1
            if rank == 0 and step % args.log_interval == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
        epoch_losses.append(total / max(count, 1))
    print("IMAGEKIT_TRAIN " + json.dumps({
        "rank": rank, "world": world, "host": socket.gethostname(),
        "local_rank": int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", -1)),
        "first_loss": epoch_losses[0], "last_loss": epoch_losses[-1], "stage": args.stage,
        "device": str(engine.device), "backend": torch.distributed.get_backend(),
    }), flush=True)


if __name__ == "__main__":
    main()
