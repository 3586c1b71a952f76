# The first two columns of each step's rewards kept per key: every kept row is a view that
# keeps all the columns of its matrix alive, and the list of each key grows for the life of the
# tracker.
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
                self.stats[key] = []
            self.stats[key].extend(rows[:, :2])  # expect: LS005


def train(loader, model, opt):
    tracker = RewardTracker()
    for keys, x in loader:
        out = model(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.update(keys, out.detach().numpy())
