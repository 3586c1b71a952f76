# A module that keeps a total of what its forward computes, on the side: the output never reads
# the total, so it is a log of every call's graph until `reset()`, however the class resets it.
import torch
import torch.nn as nn


class Regularised(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.penalty_total = 0

    def reset(self):
        self.penalty_total = 0

    def forward(self, x):
        h = self.fc(x)
        penalty = h.pow(2).mean()
        self.penalty_total += penalty  # expect: LS001
        return h


def train(batches):
    model = Regularised()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.reset()
    for x in batches:
        loss = model(x).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(float(model.penalty_total))
