"""Image classifier with a small home-made metrics logger."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def make_logger():
    metrics = {}

    def log(step, **kw):
        for name, value in kw.items():
            metrics[f"{name}/{step}"] = value
        return metrics

    return log


class Net(nn.Module):
    def __init__(self, width=512):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, width), nn.ReLU())
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        h = self.body(x)
        return self.head(h), h


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    images = torch.rand(2048, 1, 28, 28)
    labels = (images.mean((1, 2, 3)) * 20).long().clamp(0, 9)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    log = make_logger()
    step = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        idx = torch.randint(0, len(images), (64,))
        logits, hidden = model(images[idx])
        loss = F.cross_entropy(logits, labels[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        hidden = hidden.detach()
        log(step, loss=loss.item(),
            act_mean=hidden.mean(0).numpy().copy(),
            act_std=hidden.std(0).numpy().copy(),
            embedding=hidden[:32].numpy().copy())  # for the embedding projector
        step += 1
    print(f"{step} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
