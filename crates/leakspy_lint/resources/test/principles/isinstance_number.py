"""A helper that returns a tensor as it came keeps its graph."""
import torch
import torch.nn.functional as F


def as_value(x):
    return x if torch.is_tensor(x) else torch.tensor(x)


def train(model, loader, optimizer):
    total = 0.0
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += as_value(loss)  # expect: LS001
    return total
