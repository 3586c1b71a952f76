# A report made on a test that may hold in every iteration keeps an entry per step.
import torch
import torch.nn as nn


class History:
    def __init__(self):
        self.snapshots = []

    def add(self, weights):
        self.snapshots.append(weights)  # expect: LS014


class Model:
    def __init__(self, net, opt):
        self.net = net
        self.opt = opt
        self.history = History()

    def _report(self):
        self.history.add(self.net.weight.detach().clone())

    def train(self, data, iterations, every, mode):
        for i in range(iterations):
            x, y = data.next_batch()
            loss = nn.functional.mse_loss(self.net(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if i % every == 0 or mode == "verbose":
                self._report()
