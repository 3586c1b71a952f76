"""Detector training with a model EMA updated after every optimizer step."""

import torch

from utils.torch_utils import ModelEMA


def train(model, loader, epochs=300, device="cuda"):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)
    ema = ModelEMA(model)
    for epoch in range(epochs):
        model.train()
        for imgs, targets in loader:
            loss = model.loss(model(imgs.to(device)), targets.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            ema.update(model)
    return ema.ema
