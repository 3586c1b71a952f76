"""Sequence model whose dataset decodes samples lazily and caches them on first use."""

import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class SignalDataset:
    """Decodes each signal once (slow in the real job) and keeps the decoded tensor."""

    def __init__(self, n=1024, length=8192):
        self.n, self.length = n, length
        self._decoded = {}

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i not in self._decoded:
            g = torch.Generator().manual_seed(i)
            t = torch.linspace(0, 1, self.length)
            freq = 5 + 40 * torch.rand(1, generator=g)
            signal = torch.sin(2 * math.pi * freq * t) + 0.3 * torch.randn(self.length, generator=g)
            self._decoded[i] = (signal.view(1, -1), int(freq.item() // 10))
        return self._decoded[i]


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    data = SignalDataset()
    model = nn.Sequential(
        nn.Conv1d(1, 8, 16, stride=8), nn.ReLU(),
        nn.Conv1d(8, 16, 8, stride=4), nn.ReLU(),
        nn.AdaptiveAvgPool1d(8), nn.Flatten(), nn.Linear(128, 5),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    steps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for start in range(0, len(data), 16):
            if time.monotonic() >= deadline:
                break
            items = [data[i] for i in range(start, start + 16)]
            x = torch.stack([s for s, _ in items])
            y = torch.tensor([c for _, c in items])
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps += 1
    print(f"{steps} steps, {len(data._decoded)} decoded signals cached")


if __name__ == "__main__":
    main()
