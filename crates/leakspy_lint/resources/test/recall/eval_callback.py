"""A validation loop with autograd on hands each batch's outputs to a callback that keeps them
for an end-of-validation metric: the callback's list holds every batch's graph."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class CollectOutputs:
    def __init__(self):
        self.outputs = []

    def on_batch_end(self, outputs, targets):
        self.outputs.append(outputs)  # expect: LS002
        self.targets = targets

    def compute(self):
        return torch.cat(self.outputs).mean().item()


def validate(model, loader, callback):
    model.eval()
    for x, y in loader:
        outputs = model(x)
        callback.on_batch_end(outputs, y)
    return callback.compute()


def main(model, train_loader, val_loader, epochs):
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(epochs):
        for x, y in train_loader:
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(validate(model, val_loader, CollectOutputs()))
