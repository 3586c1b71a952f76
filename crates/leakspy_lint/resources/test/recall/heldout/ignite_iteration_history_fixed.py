"""An ignite training script whose update function returns the loss tensor (not `loss.item()`),
and a handler on ITERATION_COMPLETED that keeps `engine.state.output` for a plot at the end:
each kept output is a loss with its graph.

Source: pytorch/ignite pull request #476 ("Remove extra memory usage in batch processing"):
whatever the update function returns is kept in `engine.state.output` (there, the GPU memory of
one extra batch); ignite's examples return `loss.item()` from the update function for that
reason. Fix: return `loss.item()`.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from ignite.engine import Engine, Events
from torch.utils.data import DataLoader, TensorDataset

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(8192, 32), torch.randn(8192, 1))
train_loader = DataLoader(data, batch_size=64, shuffle=True)


def update_model(engine, batch):
    model.train()
    x, y = batch
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


trainer = Engine(update_model)
losses = []


@trainer.on(Events.ITERATION_COMPLETED)
def record_loss(engine):
    losses.append(engine.state.output)


@trainer.on(Events.EPOCH_COMPLETED)
def log_epoch(engine):
    print(f"epoch {engine.state.epoch}: last loss {losses[-1]:.4f}")


trainer.run(train_loader, max_epochs=100)
