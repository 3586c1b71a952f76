# Totals that keep graphs the caller's collection does not: one made from each batch in the
# loop, and one kept on the object across calls.
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.aux_total = 0

    def epoch(self, batches):
        total = 0
        for x in batches:
            loss = self.model(x).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            total += loss  # expect: LS001
        return total

    def add_aux(self, aux_losses):
        for aux in aux_losses:
            aux.backward()
            self.aux_total += aux  # expect: LS001


trainer = Trainer(nn.Linear(4, 1))
for _ in range(100):
    trainer.epoch([torch.randn(8, 4)] * 10)
