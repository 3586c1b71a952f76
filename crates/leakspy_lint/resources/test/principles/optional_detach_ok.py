# The same average, detached unless an option asks for a differentiable one (a constrained
# objective that backpropagates through the average on purpose): the author chose when the
# graph is kept.
import torch
import torch.nn as nn


class MovingAverage(nn.Module):
    def __init__(self, decay=0.99, differentiable=False):
        super().__init__()
        self.decay = decay
        self.differentiable = differentiable
        self.register_buffer("average", torch.zeros(1))

    def forward(self, inputs):
        if not self.differentiable:
            inputs = inputs.detach()
        self.average = self.decay * self.average + (1 - self.decay) * inputs
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
