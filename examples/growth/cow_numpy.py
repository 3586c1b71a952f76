"""The same job as ``cow_dicts.py`` with the data set kept as numpy arrays.

A worker reading a row of an array touches no reference count in the
parent's pages: nothing is copied, the tree's memory stays flat.
"""

import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

RECORDS = int(os.environ.get("COW_RECORDS", "200000"))
EPOCHS = int(os.environ.get("COW_EPOCHS", "3"))
WORKERS = 2


class ArrayDataset(Dataset):
    def __init__(self, n):
        rng = np.random.default_rng(0)
        self.features = rng.random((n, 8), dtype=np.float32)
        self.labels = rng.integers(0, 4, n)
        self.ids = np.array(["rec-%d" % i for i in range(n)])

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return torch.from_numpy(self.features[i].copy()), int(self.labels[i])


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = ArrayDataset(RECORDS)
    loader = DataLoader(data, batch_size=128, shuffle=True, num_workers=WORKERS,
                        persistent_workers=True)
    model = nn.Sequential(nn.Linear(8, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    for _ in range(EPOCHS):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps += 1
    print("%d steps over %d records" % (steps, len(data)))


if __name__ == "__main__":
    main()
