# A moving average of a loss term kept on the module, updated from the graph-carrying input:
# every update links the average to this step's graph and every earlier one.
import torch
import torch.nn as nn


class MovingAverage(nn.Module):
    def __init__(self, decay=0.99):
        super().__init__()
        self.decay = decay
        self.register_buffer("average", torch.zeros(1))

    def forward(self, inputs):
        self.average = self.decay * self.average + (1 - self.decay) * inputs  # expect: LS011
        return self.average


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)
        self.constraint = MovingAverage()

    def forward(self, x):
        out = self.net(x)
        return out, self.constraint(out.pow(2).mean())


def train(model, loader, optimizer):
    for x, y in loader:
        out, avg = model(x)
        loss = (out - y).pow(2).mean() + avg.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
