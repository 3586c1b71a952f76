# A loss history a model fills while it trains and hands back from `train()`, as Keras returns
# its `History`: the caller asked for it (a loss curve to plot).
import numpy as np
import torch
import torch.nn as nn


class LossHistory:
    def __init__(self):
        self.steps = []
        self.loss_train = []

    def append(self, step, loss_train):
        self.steps.append(step)
        self.loss_train.append(loss_train)


class Model:
    def __init__(self):
        self.net = nn.Linear(8, 8)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.losshistory = LossHistory()
        self.step = 0

    def _test(self, loss):
        self.losshistory.append(self.step, np.array([loss]))

    def _train_sgd(self, iterations):
        for _ in range(iterations):
            loss = self.net(torch.randn(4, 8)).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.step += 1
            self._test(loss.item())

    def train(self, iterations):
        self._train_sgd(iterations)
        return self.losshistory
