"""Alternates small and very large batches (multi-resolution training); nothing is kept."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    model = nn.Sequential(
        nn.Linear(64, 1024), nn.ReLU(),
        nn.Linear(1024, 1024), nn.ReLU(),
        nn.Linear(1024, 1),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    steps, running = 0, 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch = 8192 if steps % 2 else 256
        x = torch.randn(batch, 64)
        y = x[:, :8].sum(1, keepdim=True)
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running = 0.99 * running + 0.01 * loss.item()
        steps += 1
    print(f"{steps} steps, running loss {running:.4f}")


if __name__ == "__main__":
    main()
