"""Tabular regression with a small Trainer class that keeps a learning curve."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.losses = []

    def train_step(self, x, y):
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        self.losses.append(loss)  # learning curve, plotted after training
        return loss

    def recent_loss(self, last=100):
        return torch.stack(self.losses[-last:]).mean().item()


def make_data(n=8192, dim=32):
    x = torch.randn(n, dim)
    y = x[:, :4].sum(1, keepdim=True) + 0.5 * x[:, 4:8].pow(2).sum(1, keepdim=True)
    return x, y + 0.1 * torch.randn(n, 1)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    x, y = make_data()
    model = nn.Sequential(
        nn.Linear(32, 256), nn.ReLU(),
        nn.Linear(256, 256), nn.ReLU(),
        nn.Linear(256, 1),
    )
    trainer = Trainer(model)
    steps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        idx = torch.randint(0, len(x), (64,))
        trainer.train_step(x[idx], y[idx])
        steps += 1
    print(f"{steps} steps, recent loss {trainer.recent_loss():.4f}")


if __name__ == "__main__":
    main()
