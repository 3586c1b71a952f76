"""Trains on an in-memory dataset (about 200 MiB) loaded once at start-up."""

import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def load_dataset(n=400_000, dim=128, seed=0):
    # stands in for np.load("features.npy"): one big float32 array
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    y = (x[:, :16].sum(1) > 0).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    x, y = load_dataset()
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    steps, running = 0, 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        idx = torch.randint(0, len(x), (128,))
        loss = F.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running = 0.99 * running + 0.01 * loss.item()
        steps += 1
    print(f"{steps} steps, running loss {running:.4f}, dataset {x.numel() * 4 / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
