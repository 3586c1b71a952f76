# The same recorders, each capped by a count the author wrote: a guard that returns once the
# counter the method steps reaches the cap (even where the cap is an option that may be
# off), and a growth made only while the counter is below it.
import time

import torch


class OutputRecorder:
    def __init__(self, num_measurements=100):
        self.num_measurements = num_measurements
        self.times = []
        self.n_measured = 0
        self._start = None

    def start(self):
        self._start = time.perf_counter()

    def stop(self, out):
        if self.num_measurements and self.n_measured >= self.num_measurements:
            return
        self.times.append(out.detach().cpu())
        self.n_measured += 1


class CappedRecorder:
    def __init__(self, limit=100):
        self.limit = limit
        self.count = 0
        self.samples = []

    def stop(self, out):
        if self.count < self.limit:
            self.samples.append(out.detach().cpu())
            self.count += 1


def train(model, loader, optimizer):
    timer = OutputRecorder()
    sampled = CappedRecorder()
    for x, y in loader:
        timer.start()
        out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        timer.stop(out)
        sampled.stop(out)
    return model
