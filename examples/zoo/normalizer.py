"""Distils a frozen teacher's features into a small student; teacher features are centred."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RunningNorm:
    """Centres features with an exponential running mean."""

    def __init__(self, dim):
        self.mean = torch.zeros(dim)

    def update(self, x):
        self.mean = 0.99 * self.mean + 0.01 * x.mean(0)

    def __call__(self, x):
        return x - self.mean


def mlp(sizes):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.GELU()]
    return nn.Sequential(*layers[:-1])


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    teacher = mlp([48, 32, 32])
    teacher.eval()  # pretrained weights in the real job; kept frozen
    student = mlp([48, 256, 256, 32])
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-3)
    norm = RunningNorm(32)
    steps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        x = torch.randn(32, 48)
        feats = teacher(x)
        norm.update(feats)
        target = norm(feats).detach()
        loss = F.mse_loss(student(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
    print(f"{steps} steps, distillation loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
