"""Averages a metric over the ranks and the steps of an epoch."""

import horovod.torch as hvd
import torch


def accuracy(output, target):
    pred = output.max(1, keepdim=True)[1]
    return pred.eq(target.view_as(pred)).float().mean()


class Metric:
    def __init__(self, name):
        self.name = name
        self.sum = torch.tensor(0.0)
        self.n = torch.tensor(0.0)

    def update(self, val):
        self.sum += hvd.allreduce(val.cpu(), name=self.name)  # expect: LS001
        self.n += 1

    @property
    def avg(self):
        return self.sum / self.n
