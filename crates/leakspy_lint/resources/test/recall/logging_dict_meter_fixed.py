"""A classifier trainer logs a dict of losses through a small average meter and keeps every
step's log for the epoch summary: the loss in the dict keeps its graph."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class AverageMeter:
    def __init__(self):
        self.sum = 0.0
        self.count = 0

    def update(self, value, n=1):
        self.sum += value * n
        self.count += n

    def average(self):
        return self.sum / max(self.count, 1)


def train_epoch(model, loader, optimizer, meter):
    epoch_logs = []
    for step, (x, y) in enumerate(loader):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log = {"loss": loss.item(), "acc": (logits.argmax(1) == y).float().mean().item()}
        meter.update(log["loss"], x.shape[0])
        epoch_logs.append(log)
    print(f"loss {meter.average():.4f} over {len(epoch_logs)} steps")


def main(loader):
    model = nn.Linear(20, 5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    meter = AverageMeter()
    for epoch in range(10):
        train_epoch(model, loader, optimizer, meter)
