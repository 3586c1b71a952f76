"""Validation gathers predictions by concatenating each batch's logits onto the running tensor,
with autograd still on: every concatenation links the new tensor to all earlier batches' graphs,
and the tensor grows on the device for the whole evaluation."""

import torch
import torch.nn as nn
import torch.nn.functional as F


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    preds = torch.empty(0, 10, device=device)
    targets = torch.empty(0, dtype=torch.long, device=device)
    for x, y in loader:
        logits = model(x.to(device))
        preds = torch.cat([preds, logits])
        targets = torch.cat([targets, y.to(device)])
    return (preds.argmax(1) == targets).float().mean().item()


def train(model, train_loader, val_loader, device, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(epoch, evaluate(model, val_loader, device))
