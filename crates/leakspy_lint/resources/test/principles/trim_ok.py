# A trim right after the append bounds the history: constant memory, whatever it holds.
import torch.nn as nn


class Agent:
    def __init__(self, model, opt):
        self.model = nn.Linear(4, 2)
        self.opt = opt
        self.recent = []
        self.window = []
        self.last = []
        self.tail = []

    def update(self, x):
        out = self.model(x)
        loss = out.mean()
        loss.backward()
        self.opt.step()
        self.recent.append(out)
        if len(self.recent) > 100:
            self.recent.pop(0)
        self.window.append(out.detach())
        if len(self.window) > 100:
            del self.window[0]
        self.last.append(out.detach().cuda())
        self.last = self.last[-50:]
        self.tail.append(out.detach())
        while len(self.tail) > 10:
            self.tail.pop(0)


def train(loader, opt):
    model = nn.Linear(4, 2)
    recent, window, last, tail = [], [], [], []
    for x in loader:
        out = model(x)
        loss = out.mean()
        loss.backward()
        opt.step()
        recent.append(out)
        if len(recent) > 100:
            recent.pop(0)
        window.append(out.detach().cuda())
        if len(window) > 100:
            del window[0]
        last.append(loss)
        last = last[-50:]
        tail.append(out.detach().to("cuda"))
        while len(tail) > 10:
            tail.pop(0)
    return recent, window, last, tail
