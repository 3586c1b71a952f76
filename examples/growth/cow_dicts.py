"""DataLoader workers over a data set of Python objects: copy-on-read.

The data set is a list of dicts built in the parent before the workers fork.
Each worker that reads a record touches the reference counts of the dict,
its list and its floats, and the kernel copies every page it touches: the
workers' private memory grows, epoch by epoch, until each has copied what
it reads, though no object is added anywhere. The fix is to keep the data
as arrays (``cow_numpy.py``, the same job).
"""

import os
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

RECORDS = int(os.environ.get("COW_RECORDS", "200000"))
EPOCHS = int(os.environ.get("COW_EPOCHS", "3"))
WORKERS = 2


class RecordDataset(Dataset):
    def __init__(self, n):
        rng = random.Random(0)
        self.records = [
            {"features": [rng.random() for _ in range(8)], "label": rng.randrange(4), "id": "rec-%d" % i}
            for i in range(n)
        ]

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        r = self.records[i]
        return torch.tensor(r["features"]), r["label"]


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = RecordDataset(RECORDS)
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
