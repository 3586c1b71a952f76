# Code called from a loop that steps an optimizer is a training iteration.
import torch.nn as nn


class Trainer:
    def __init__(self, opt):
        self.model = nn.Linear(4, 2)
        self.opt = opt
        self.history = []

    def record(self, out):
        self.history.append(out)  # expect: LS002

    def fit(self, loader):
        for x, y in loader:
            out = self.model(x)
            loss = (out - y).pow(2).mean()
            loss.backward()
            self.opt.step()
            self.record(out)


def main(loader, opt):
    Trainer(opt).fit(loader)
