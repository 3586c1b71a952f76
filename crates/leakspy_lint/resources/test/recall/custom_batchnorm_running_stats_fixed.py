"""A batch normalization layer written by hand (as in d2l's "Batch Normalization" chapter, and in
synsin's and nflows' own batch norms): the running mean and variance are updated from the batch
statistics, which carry the input's graph, so each update links the buffers to this step's graph
and through it to every earlier step's. Memory grows by megabytes per second of training.

Source: pytorch/pytorch issue #20275, "Memory (CPU/sys) leak with custom batch norm layer"
("that `running_mean` update is exactly your problem. You keep extending the graph"); the same
fix in d2l-ai/d2l-en pull request #1342, facebookresearch/synsin pull request #20 and
bayesiains/nflows pull request #11. Fix: update the running statistics from detached values.
"""

import torch
import torch.nn as nn


class ManualBatchNorm2d(nn.BatchNorm2d):
    def forward(self, x):
        if self.training:
            mean = x.mean(dim=(0, 2, 3))
            var = x.var(dim=(0, 2, 3), unbiased=False)
            self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean.detach())
            self.running_var.mul_(1 - self.momentum).add_(self.momentum * var.detach())
        else:
            mean, var = self.running_mean, self.running_var
        x_hat = (x - mean[None, :, None, None]) / torch.sqrt(var[None, :, None, None] + self.eps)
        return x_hat * self.weight[None, :, None, None] + self.bias[None, :, None, None]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, kernel_size=5), ManualBatchNorm2d(6), nn.Sigmoid(), nn.AvgPool2d(2, 2),
            nn.Conv2d(6, 16, kernel_size=5), ManualBatchNorm2d(16), nn.Sigmoid(), nn.AvgPool2d(2, 2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 4 * 4, 120), nn.Sigmoid(), nn.Linear(120, 10))

    def forward(self, x):
        return self.head(self.features(x))


def train(net, train_iter, num_epochs=10, lr=1.0):
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    loss = nn.CrossEntropyLoss()
    for epoch in range(num_epochs):
        net.train()
        for X, y in train_iter:
            optimizer.zero_grad()
            l = loss(net(X), y)
            l.backward()
            optimizer.step()
