# A loop over a fixed small range inside an epoch (classes, layers), whose accumulator is made
# afresh each epoch, is constant memory.
import torch
import torch.nn as nn

NUM_CLASSES = 10


def train(loader, opt, epochs):
    model = nn.Linear(4, NUM_CLASSES)
    for epoch in range(epochs):
        per_class = []
        for x, y in loader:
            out = model(x)
            loss = out.mean()
            loss.backward()
            opt.step()
        for c in range(NUM_CLASSES):
            per_class.append(out[:, c].detach().cuda())
        heads = {}
        for layer in range(4):
            heads[layer] = out.detach().cuda()
    return per_class
