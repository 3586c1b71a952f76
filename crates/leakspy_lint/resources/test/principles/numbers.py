# A tensor per step is not a number.
import torch.nn as nn


class Agent:
    def __init__(self, opt):
        self.model = nn.Linear(4, 2)
        self.opt = opt
        self.outputs = []

    def update(self, i, batch):
        out = self.model(batch)
        out.mean().backward()
        self.opt.step()
        self.outputs.append(out.detach())  # expect: LS014


def train(loader, opt):
    agent = Agent(opt)
    for i in range(1000):
        for batch in loader:
            agent.update(i, batch)
