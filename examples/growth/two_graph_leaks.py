"""Two leaks feed one series: the autograd graphs alive between steps.

``Trainer.losses`` keeps every step's loss with its graph (the loss was
meant to be logged), and ``RunningMean.value`` is updated from the model's
output with autograd on, so each update links the statistic to this step's
graph and, through its previous value, to every earlier one. Both holders
keep graphs: the report must name both, with the findings on their lines.
"""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SECONDS = float(os.environ.get("ZOO_SECONDS", "25"))


class RunningMean:
    def __init__(self):
        self.value = torch.zeros(())
        self.count = 0

    def update(self, x):
        self.count += 1
        self.value = self.value + (x.mean() - self.value) / self.count


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        self.losses = []
        self.output_mean = RunningMean()

    def step(self, x, y):
        out = self.model(x)
        loss = F.cross_entropy(out, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.losses.append(loss)
        self.output_mean.update(out)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    trainer = Trainer(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)))
    steps = 0
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        trainer.step(torch.randn(32, 64), torch.randint(0, 10, (32,)))
        steps += 1
        time.sleep(0.002)
    print("%d steps, mean output %.4f" % (steps, trainer.output_mean.value.item()))


if __name__ == "__main__":
    main()
