"""A collective of a distributed library returns its argument's values with their graph
(horovod's allreduce is an autograd function): averaging a loss across ranks keeps its graph."""
import horovod.torch as hvd
import torch
import torch.nn.functional as F


def train(model, loader, optimizer):
    total = torch.tensor(0.0)
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += hvd.allreduce(loss)  # expect: LS001
    return total
