# A total over one pass of the data before a single optimizer step keeps a graph for every batch
# of the data set (an L-BFGS closure's shape), and a total carried across the calls of a training
# step keeps one for every step.
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, accumulate_every):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.accumulate_every = accumulate_every
        self.total = 0

    def full_batch_step(self, loader):
        total = 0
        for x in loader:
            loss = self.model(x).pow(2).mean()
            loss.backward()
            total += loss  # expect: LS001
        self.opt.step()
        self.opt.zero_grad()
        return total

    def train_step(self, x):
        for _ in range(self.accumulate_every):
            loss = self.model(x).pow(2).mean() / self.accumulate_every
            self.total += loss  # expect: LS001
            loss.backward()
        self.opt.step()
        self.opt.zero_grad()


trainer = Trainer(nn.Linear(4, 1), 4)
for i in range(1000):
    total = trainer.full_batch_step([torch.randn(8, 4)] * 10)
    trainer.train_step(torch.randn(8, 4))
    print(total.item())
