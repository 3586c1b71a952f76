# Numbers are not a leak: ints from `range` and `len`, `.item()`, arithmetic on numbers.
import torch.nn as nn


class Agent:
    def __init__(self, opt):
        self.model = nn.Linear(4, 2)
        self.opt = opt
        self.steps = []
        self.sizes = []
        self.losses = []
        self.scaled = []

    def update(self, i, batch):
        loss = self.model(batch).mean()
        loss.backward()
        self.opt.step()
        self.steps.append(i)
        self.sizes.append(len(batch))
        self.losses.append(loss.item())
        self.scaled.append(loss.item() * 2 + len(batch))


def normalize(batch):
    return batch / batch.norm()


def train(loader, opt):
    agent = Agent(opt)
    for i in range(1000):
        for batch in loader:
            agent.update(i, batch=normalize(batch))
