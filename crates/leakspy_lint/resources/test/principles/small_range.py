# The same accumulator made once before the epochs grows with every epoch.
import torch
import torch.nn as nn

NUM_CLASSES = 10


def train(loader, opt, epochs):
    model = nn.Linear(4, NUM_CLASSES)
    per_class = []
    snapshots = []
    for epoch in range(epochs):
        for x, y in loader:
            out = model(x)
            loss = out.mean()
            loss.backward()
            opt.step()
            per_class.append(out)  # expect: LS002
            if epoch % 10 == 0:
                snapshots.append(out)  # expect: LS002
    return per_class, snapshots
