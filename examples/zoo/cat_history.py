"""Regression whose predictions are collected for an end-of-run calibration report."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

history = torch.empty(0, 1)


def train_step(model, optimizer, x, y):
    global history
    pred = model(x)
    loss = F.smooth_l1_loss(pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    history = torch.cat([history, pred])
    return loss.item()


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    x_all = torch.randn(20000, 16)
    y_all = torch.sin(x_all[:, :1] * 2) + x_all[:, 1:2] * x_all[:, 2:3]
    model = nn.Sequential(
        nn.Linear(16, 128), nn.Tanh(),
        nn.Linear(128, 128), nn.Tanh(),
        nn.Linear(128, 1),
    )
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    steps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        idx = torch.randint(0, len(x_all), (64,))
        train_step(model, optimizer, x_all[idx], y_all[idx])
        steps += 1
    print(f"{steps} steps, mean prediction {history.mean().item():.3f} over {len(history)} samples")


if __name__ == "__main__":
    main()
