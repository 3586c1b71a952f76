# An object made as a local of a function that drives no training, stepped over one batch's
# items and dropped when the call returns, keeps one call's entries.
import numpy as np
import torch


class MAE:
    def __init__(self):
        self.maes = []

    def step(self, pred, gt):
        self.maes.append(np.mean(np.abs(pred - gt)))

    def get_results(self):
        return float(np.mean(np.array(self.maes)))


def compute(logits, labels):
    n = labels.shape[0]
    metric = MAE()
    for i in range(n):
        metric.step(logits[i].numpy(), labels[i].numpy())
    return torch.tensor(metric.get_results())
