import torch
import torch.nn as nn
import torch.nn.functional as F


def train(model, loader, optimizer):
    losses = []
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def grad_accumulation(model, loader, optimizer):
    for batch in loader:
        parts = []
        for x, y in batch:
            parts.append(F.mse_loss(model(x), y))
        torch.stack(parts).mean().backward()
        optimizer.step()


def grad_accumulation_outer(model, chunks):
    parts = []
    for x, y in chunks:
        parts.append(F.mse_loss(model(x), y))
    total = sum(parts)
    total.backward()


def evaluate(model, loader):
    outputs = []
    with torch.no_grad():
        for x in loader:
            outputs.append(model(x))
    return outputs


@torch.inference_mode()
def predict(model, loader):
    preds = []
    for x in loader:
        preds.append(model(x))
    return preds


def detached(model, loader):
    history = []
    for x in loader:
        history.append(model(x).detach().cpu())
    return history


def per_iteration(model, loader):
    for x in loader:
        step_outputs = []
        step_outputs.append(model(x))
        print(len(step_outputs))


class Buffer:
    def __init__(self):
        self.items = []

    def add(self, obs, action):
        self.items.append((obs, action))


def cleared_each_step(model, loader, optimizer):
    window = []
    for x in loader:
        window.append(model(x).sum())
        loss = window[0]
        window.clear()
        optimizer.step()


def numbers(loader):
    totals = []
    for x in loader:
        totals.append(len(x))
    return totals


class Unrolled(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(8, 8)

    def forward(self, xs, h):
        outputs = []
        for x in xs:
            h = self.cell(x, h)
            outputs.append(h)
        return torch.stack(outputs), h
