"""A DDP training job (torchrun, gloo on CPU) where only rank 0 leaks.

Rank 0 evaluates a validation batch every step for its progress log, with
grad enabled (no `torch.no_grad()`), and keeps the loss tensor: each one holds
its autograd graph with every saved activation. The other ranks are healthy. Run it under leakspy:

    leakspy run -- python -m torch.distributed.run --nproc_per_node 2 \
        examples/ddp/rank0_metrics.py --seconds 20

and the report's rank table shows rank 0 growing and rank 1 flat.
"""

import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class ProgressLog:
    def __init__(self):
        self.losses = []

    def record(self, loss):
        self.losses.append(loss)  # the leak: loss.item() was meant


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 1))
    )
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    log = ProgressLog() if rank == 0 else None
    x_val = torch.randn(128, 64)
    y_val = torch.randn(128, 1)

    deadline = time.monotonic() + args.seconds
    stop = torch.zeros(1)
    step = 0
    while True:
        x = torch.randn(128, 64)
        y = torch.randn(128, 1)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log is not None:
            val_loss = F.mse_loss(model.module(x_val), y_val)
            log.record(val_loss)
        step += 1
        # Every rank must run the same number of steps (allreduce in
        # backward): rank 0's clock decides for all.
        stop.fill_(1.0 if rank == 0 and time.monotonic() > deadline else 0.0)
        dist.all_reduce(stop)
        if stop.item() > 0:
            break
    if rank == 0:
        print("steps:", step, "losses kept:", len(log.losses))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
