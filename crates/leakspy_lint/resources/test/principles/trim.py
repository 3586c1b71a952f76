# A trim that runs less often than the append (once per episode, outside the step loop) does
# not bound it.
import torch.nn as nn


class Agent:
    def __init__(self, model, opt):
        self.model = nn.Linear(4, 2)
        self.opt = opt
        self.recent = []

    def update(self, x):
        out = self.model(x)
        out.mean().backward()
        self.opt.step()
        self.recent.append(out.detach())  # expect: LS014

    def end_episode(self):
        if len(self.recent) > 100:
            self.recent.pop(0)


def train(loader, opt):
    model = nn.Linear(4, 2)
    recent = []
    for x in loader:
        out = model(x)
        out.mean().backward()
        opt.step()
        recent.append(out)  # expect: LS002
    if len(recent) > 100:
        recent.pop(0)
    return recent
