"""A small MAML wrapper: `adapt` replaces the module's weights by updated, differentiable
tensors (non-leaf, with their graph), so that the outer loss can backpropagate through them."""

import torch
import torch.nn as nn


class MAML(nn.Module):
    def __init__(self, model, lr):
        super().__init__()
        self.module = model
        self.lr = lr

    def forward(self, x):
        return self.module(x)

    def clone(self):
        cloned = MAML(_clone_module(self.module), self.lr)
        return cloned

    def adapt(self, loss):
        params = [p for p in self.module.parameters()]
        grads = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
        for module in self.module.modules():
            for name, p in list(module._parameters.items()):
                if p is None:
                    continue
                g = grads[params.index(p)] if p in params else None
                if g is not None:
                    module._parameters[name] = p - self.lr * g


def _clone_module(module):
    clone = module.__new__(type(module))
    clone.__dict__ = module.__dict__.copy()
    clone._parameters = {k: (p.clone() if p is not None else None) for k, p in module._parameters.items()}
    clone._modules = {k: _clone_module(m) for k, m in module._modules.items()}
    return clone


def fast_adapt(batch, learner, loss, adaptation_steps, shots, ways):
    data, labels = batch
    adaptation_data, evaluation_data = data[: shots * ways], data[shots * ways:]
    adaptation_labels, evaluation_labels = labels[: shots * ways], labels[shots * ways:]
    for step in range(adaptation_steps):
        learner.adapt(loss(learner(adaptation_data), adaptation_labels))
    return loss(learner(evaluation_data), evaluation_labels)
