"""Classifier on synthetic blobs; reports the mean training loss of the run."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def make_blobs(n=10000, dim=20, classes=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = 3 * torch.randn(classes, dim, generator=g)
    labels = torch.randint(0, classes, (n,), generator=g)
    points = centers[labels] + torch.randn(n, dim, generator=g)
    return points, labels


def batches(points, labels, batch_size):
    while True:
        order = torch.randperm(len(points))
        for i in range(0, len(order) - batch_size + 1, batch_size):
            idx = order[i:i + batch_size]
            yield points[idx], labels[idx]


def train(model, data, seconds):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    total_loss = 0.0
    steps = 0
    deadline = time.monotonic() + seconds
    for x, y in data:
        if time.monotonic() >= deadline:
            break
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss
        steps += 1
    return total_loss / max(steps, 1), steps


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    points, labels = make_blobs()
    model = nn.Sequential(
        nn.Linear(20, 128), nn.ReLU(),
        nn.Linear(128, 128), nn.ReLU(),
        nn.Linear(128, 5),
    )
    mean_loss, steps = train(model, batches(points, labels, 64), seconds)
    print(f"{steps} steps, mean loss {float(mean_loss):.4f}")


if __name__ == "__main__":
    main()
