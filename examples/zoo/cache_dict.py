"""Linear probe on top of a frozen encoder, with the encoder features memoised."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

_feature_cache = {}


def encode(encoder, images, key):
    if key not in _feature_cache:
        with torch.no_grad():
            _feature_cache[key] = encoder(images)
    return _feature_cache[key]


def augment(images, g):
    shift = torch.randint(-2, 3, (2,), generator=g).tolist()
    return torch.roll(images, shifts=shift, dims=(2, 3)) + 0.05 * torch.randn(images.shape, generator=g)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    encoder = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Flatten(),
    ).eval()
    probe = nn.Linear(32 * 8 * 8, 10)
    optimizer = torch.optim.SGD(probe.parameters(), lr=0.01, momentum=0.9)
    images = torch.rand(512, 3, 16, 16)
    labels = torch.randint(0, 10, (512,))
    g = torch.Generator().manual_seed(1)
    step = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        idx = torch.randint(0, len(images), (64,), generator=g)
        batch = augment(images[idx], g)
        feats = encode(encoder, batch, key=(step, float(batch.sum())))
        loss = F.cross_entropy(probe(feats), labels[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
    print(f"{step} steps, {len(_feature_cache)} cached feature batches")


if __name__ == "__main__":
    main()
