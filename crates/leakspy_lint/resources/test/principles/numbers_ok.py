# Numbers are not a leak: ints from `range` and `len`, `.item()`, arithmetic on numbers, an
# attribute only ever bound to numbers (a clock reading), torch's memory counters.
import time

import torch
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


class PhaseTimer:
    def __init__(self):
        self.times = []
        self.peaks = []
        self._start = None

    def start(self):
        self._start = time.perf_counter()

    def stop(self):
        self.times.append(time.perf_counter() - self._start)
        self.peaks.append(torch.cuda.max_memory_allocated())


class Timed:
    def __init__(self, opt):
        self.model = nn.Linear(4, 2)
        self.opt = opt
        self.timer = PhaseTimer()

    def fit(self, loader):
        for batch in loader:
            self.timer.start()
            loss = self.model(batch).mean()
            loss.backward()
            self.opt.step()
            self.timer.stop()
