# A penalty that collects a term per forward through hooks, in a class this script makes and
# trains with, whose reset method the loop never calls: one graph per forward, kept.
import torch
import torch.nn as nn


class Penalty:
    def __init__(self, model):
        self.model = model
        self.terms = []
        self.register()

    def reset(self):
        self.terms = []

    def register(self):
        def hook(module, inputs, output):
            self.terms.append(output.pow(2).mean())  # expect: LS006

        for m in self.model.modules():
            if isinstance(m, nn.Linear):
                m.register_forward_hook(hook)

    def value(self):
        return sum(self.terms)


def train(model, loader, opt):
    penalty = Penalty(model)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y) + 0.01 * penalty.value()
        opt.zero_grad()
        loss.backward()
        opt.step()
