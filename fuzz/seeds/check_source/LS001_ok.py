import torch
import torch.nn.functional as F


def train(model, loader, optimizer):
    total_loss = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    return total_loss


def accumulate(model, micro_batches, optimizer):
    # The accumulator is re-created each step and backpropagated: gradient accumulation.
    for batch in micro_batches:
        acc = 0
        for x, y in batch:
            acc = acc + F.mse_loss(model(x), y)
        acc.backward()
        optimizer.step()


def accumulate_outer(model, chunks, optimizer):
    loss = 0
    for x, y in chunks:
        loss += F.mse_loss(model(x), y)
    loss.backward()


@torch.no_grad()
def evaluate(model, loader):
    total = 0
    for x, y in loader:
        total += F.mse_loss(model(x), y)
    return total


def evaluate2(model, loader):
    total = 0
    with torch.no_grad():
        for x, y in loader:
            total = total + model(x).sum()
    return total


def count(items):
    n = 0
    for item in items:
        n += item
    return n


def detached(model, loader):
    running = 0
    for x, y in loader:
        running += F.mse_loss(model(x), y).detach()
    return running
