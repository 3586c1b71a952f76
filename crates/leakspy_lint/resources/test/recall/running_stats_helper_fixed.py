"""A hand-written batch norm returns its updated statistics with the output, and the module
keeps them by tuple assignment: each step's statistics carry that step's graph."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def batch_norm(x, running_mean, running_var, momentum=0.1):
    mean = x.mean(0)
    var = x.var(0)
    new_mean = (1 - momentum) * running_mean + momentum * mean
    new_var = (1 - momentum) * running_var + momentum * var
    return (x - mean) / (var + 1e-5).sqrt(), new_mean, new_var


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.running_mean = torch.zeros(dim)
        self.running_var = torch.ones(dim)

    def forward(self, x):
        h = self.fc(x)
        y, mean, var = batch_norm(h, self.running_mean, self.running_var)
        self.running_mean, self.running_var = mean.detach(), var.detach()
        return torch.relu(y)


def fit(data, steps):
    block = Block(64)
    head = nn.Linear(64, 10)
    optimizer = torch.optim.SGD(list(block.parameters()) + list(head.parameters()), lr=0.1)
    for step in range(steps):
        x, y = data[step % len(data)]
        loss = F.cross_entropy(head(block(x)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
