"""Multi-task tabular model (regression + classification heads) with a small Trainer class."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiTaskNet(nn.Module):
    def __init__(self, dim=32, hidden=256, features=64, classes=4):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(dim, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, features), nn.ReLU(),
        )
        self.reg_head = nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, 1))
        self.cls_head = nn.Linear(features, classes)

    def forward(self, x):
        h = self.trunk(x)
        return self.reg_head(h), self.cls_head(h)


class Trainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.losses = []

    def train_step(self, x, y_reg, y_cls):
        self.optimizer.zero_grad()
        pred, logits = self.model(x)
        reg_loss = F.mse_loss(pred, y_reg)
        cls_loss = F.cross_entropy(logits, y_cls)
        reg_loss.backward(retain_graph=True)  # the trunk is shared with the second head
        (0.5 * cls_loss).backward()
        self.optimizer.step()
        self.losses.append((reg_loss, cls_loss))  # learning curves, plotted after training
        return reg_loss, cls_loss

    def recent_loss(self, last=100):
        return torch.stack([r for r, _ in self.losses[-last:]]).mean().item()


def make_data(n=8192, dim=32):
    x = torch.randn(n, dim)
    y_reg = x[:, :4].sum(1, keepdim=True) + 0.5 * x[:, 4:8].pow(2).sum(1, keepdim=True)
    y_cls = (x[:, 8] > 0).long() * 2 + (x[:, 9] > 0).long()
    return x, y_reg + 0.1 * torch.randn(n, 1), y_cls


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    x, y_reg, y_cls = make_data()
    trainer = Trainer(MultiTaskNet())
    steps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        idx = torch.randint(0, len(x), (64,))
        trainer.train_step(x[idx], y_reg[idx], y_cls[idx])
        steps += 1
    print(f"{steps} steps, recent regression loss {trainer.recent_loss():.4f}")


if __name__ == "__main__":
    main()
