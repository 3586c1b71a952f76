"""Linear classifier on 2048-d features of a frozen backbone, with the backbone outputs memoised."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

_feature_cache = {}


def encode(backbone, images, key):
    if key not in _feature_cache:
        with torch.no_grad():
            _feature_cache[key] = backbone(images)
    return _feature_cache[key]


def augment(images, g):
    shift = torch.randint(-2, 3, (2,), generator=g).tolist()
    return torch.roll(images, shifts=shift, dims=(2, 3)) + 0.05 * torch.randn(images.shape, generator=g)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    backbone = nn.Sequential(  # pretrained in the real job
        nn.Flatten(),
        nn.Linear(3 * 32 * 32, 2048), nn.ReLU(),
        nn.Linear(2048, 2048), nn.ReLU(),
        nn.Linear(2048, 2048), nn.ReLU(),
        nn.Linear(2048, 2048), nn.ReLU(),
        nn.Linear(2048, 2048), nn.ReLU(),
    ).eval()
    head = nn.Linear(2048, 10)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.01, momentum=0.9)
    images = torch.rand(512, 3, 32, 32)
    labels = torch.randint(0, 10, (512,))
    g = torch.Generator().manual_seed(1)
    step = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        idx = torch.randint(0, len(images), (32,), generator=g)
        batch = augment(images[idx], g)
        feats = encode(backbone, batch, key=(step, float(batch.sum())))
        loss = F.cross_entropy(head(feats), labels[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
    print(f"{step} steps, {len(_feature_cache)} cached feature batches")


if __name__ == "__main__":
    main()
