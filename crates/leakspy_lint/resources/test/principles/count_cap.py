# A recorder that keeps a sample of every step's outputs: nothing caps how many it keeps, so a run of a
# million steps keeps a million entries.
import time

import torch


class OutputRecorder:
    def __init__(self):
        self.times = []
        self._start = None

    def start(self):
        self._start = time.perf_counter()

    def stop(self, out):
        self.times.append(out.detach().cpu())  # expect: LS014


def train(model, loader, optimizer):
    timer = OutputRecorder()
    for x, y in loader:
        timer.start()
        out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        timer.stop(out)
    return model
