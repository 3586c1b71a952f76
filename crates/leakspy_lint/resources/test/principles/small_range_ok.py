# A loop over a fixed small range inside an epoch (classes, layers), whose accumulator is made
# afresh each epoch, is constant memory.
import torch
import torch.nn as nn

NUM_CLASSES = 10


def train(loader, opt, epochs):
    model = nn.Linear(4, NUM_CLASSES)
    snapshots = []
    for epoch in range(epochs):
        per_class = []
        for x, y in loader:
            out = model(x)
            loss = out.mean()
            loss.backward()
            opt.step()
        # A guard over a set written out in the source runs a fixed number of times.
        if epoch in (0, 10, epochs - 1):
            snapshots.append(out)
        for c in range(NUM_CLASSES):
            per_class.append(out[:, c].detach().cuda())
        heads = {}
        for layer in range(4):
            heads[layer] = out.detach().cuda()
    return per_class, snapshots
