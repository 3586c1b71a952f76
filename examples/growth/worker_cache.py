"""A cache filled inside DataLoader workers.

``SpectrogramDataset.__getitem__`` memoises every sample it computes in
``self.cache``. Each worker has its own copy of the data set (forked from
the parent), so each fills its own cache, and the data set is far larger
than what one run reads: the workers' memory grows for the whole run.
"""

import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

SECONDS = float(os.environ.get("ZOO_SECONDS", "30"))


class SpectrogramDataset(Dataset):
    def __init__(self, n):
        self.n = n
        self.cache = {}

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        if idx in self.cache:
            return self.cache[idx]
        rng = np.random.default_rng(idx)
        spec = torch.from_numpy(rng.random((32, 32), dtype=np.float32))  # 4 KiB
        sample = (spec, idx % 10)
        self.cache[idx] = sample
        return sample


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = SpectrogramDataset(10_000_000)
    loader = DataLoader(data, batch_size=16, num_workers=2,
                        persistent_workers=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(32 * 32, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    deadline = time.monotonic() + SECONDS
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
        if time.monotonic() > deadline:
            break
    print("%d steps" % steps)


if __name__ == "__main__":
    main()
