"""MAML on Omniglot (in the style of learn2learn's example): for each validation and test task
the meta-model is copied with `copy.deepcopy` and adapted. The MAML wrapper's adapted weights are
non-leaf tensors with their graph, and a deep copy of it keeps that graph and duplicates it per
task; memory grows with every meta-iteration.

Source: learnables/learn2learn issue #88, "MAML Omniglot Memory Leak" ("Using `deepcopy` in the
MAML Omniglot example leads to a memory leak"), fixed by pull request #89: `maml.clone()`
(which keeps the copy in the graph it belongs to) instead of `deepcopy(maml)`.
"""

import copy
import random

import torch
import torch.nn as nn

from meta.maml import MAML, fast_adapt


def main(ways=5, shots=1, meta_lr=0.003, fast_lr=0.5, meta_batch_size=32, iterations=60000):
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 256), nn.ReLU(), nn.Linear(256, ways))
    maml = MAML(model, lr=fast_lr)
    opt = torch.optim.Adam(maml.parameters(), meta_lr)
    loss = nn.CrossEntropyLoss(reduction="mean")
    for iteration in range(iterations):
        opt.zero_grad()
        meta_train_error = 0.0
        meta_valid_error = 0.0
        for task in range(meta_batch_size):
            learner = maml.clone()
            batch = train_tasks.sample()
            evaluation_error = fast_adapt(batch, learner, loss, 1, shots, ways)
            evaluation_error.backward()
            meta_train_error += evaluation_error.item()

            learner = copy.deepcopy(maml)  # expect: any
            batch = valid_tasks.sample()
            evaluation_error = fast_adapt(batch, learner, loss, 1, shots, ways)
            meta_valid_error += evaluation_error.item()
        for p in maml.parameters():
            p.grad.data.mul_(1.0 / meta_batch_size)
        opt.step()
        if iteration % 100 == 0:
            print(iteration, meta_train_error / meta_batch_size, meta_valid_error / meta_batch_size)
