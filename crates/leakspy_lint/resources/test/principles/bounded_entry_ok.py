# Each key keeps its last 64 rows at most: a `deque(maxlen=...)` entry holds the bases of a
# bounded number of rows, however long the run.
from collections import deque

import numpy as np


class RewardTracker:
    def __init__(self):
        self.stats = {}

    def update(self, keys, rewards):
        keys = np.asarray(keys)
        rewards = np.asarray(rewards)
        for key in np.unique(keys):
            rows = rewards[keys == key]
            if key not in self.stats:
                self.stats[key] = deque(maxlen=64)
            self.stats[key].extend(rows[:, :2])


def train(loader, model, opt):
    tracker = RewardTracker()
    for keys, x in loader:
        out = model(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.update(keys, out.detach().numpy())
