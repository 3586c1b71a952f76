"""A multi-task trainer sums each task's loss per epoch in a dict of running totals (and a
defaultdict of zeros), so every total links to every step's graph."""

from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiTaskTrainer:
    def __init__(self, model, tasks):
        self.model = model
        self.tasks = tasks
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.task_totals = {name: 0.0 for name in tasks}
        self.sums = defaultdict(lambda: torch.zeros(()))

    def train_step(self, batch):
        outputs = self.model(batch["x"])
        losses = {name: F.mse_loss(outputs[name], batch[name]) for name in self.tasks}
        total = sum(losses.values())
        self.optimizer.zero_grad()
        total.backward()
        self.optimizer.step()
        for name in self.tasks:
            self.task_totals[name] += losses[name]  # expect: LS001
            self.sums[name] += losses[name]  # expect: LS001

    def summary(self):
        print({k: float(v) for k, v in self.task_totals.items()})


def run(model, loader, tasks):
    trainer = MultiTaskTrainer(model, tasks)
    for step, batch in enumerate(loader):
        trainer.train_step(batch)
    trainer.summary()
