"""A trainer tracks how often the model predicts each class, counting predictions keyed by the
predicted class itself: the elements of `argmax(1)` are 0-d tensors, which hash by identity, so
every step adds new keys and keeps their tensors alive."""

from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F


def train(model, loader, optimizer, epochs):
    predicted = Counter()
    for epoch in range(epochs):
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            for label in logits.argmax(1):
                predicted[label.item()] += 1
    return predicted.most_common(5)
