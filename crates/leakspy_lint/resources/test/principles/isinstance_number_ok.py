"""Where `isinstance` says a value is a number, it is one: `x if isinstance(x, Number) else
x.item()` returns a number either way."""
import numbers

import torch.nn.functional as F


def torch_item(x):
    return x if isinstance(x, numbers.Number) else x.item()


def train(model, loader, optimizer):
    total = 0.0
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += torch_item(loss)
    return total
