# Weight averages kept on the object and updated from the model's parameters with autograd on,
# in the forms the in-place chain missed: `copy_` of a value made from the average itself, a
# decayed average written back into an entry of a dict on the object, and the parameters of a
# copy of the model (kept by a helper's caller, or on the object) updated in place.
import copy

import torch
import torch.nn as nn


class ModelEMA:
    def __init__(self, model, decay=0.999):
        self.decay = decay
        self.params = [p.detach().clone() for p in model.parameters()]
        self.shadow = {n: p.detach().clone() for n, p in model.named_parameters()}

    def step(self, model):
        for ema_p, p in zip(self.params, model.parameters()):
            ema_p.copy_(ema_p * self.decay + p * (1.0 - self.decay))  # expect: LS011

    def step_named(self, model):
        for n, p in model.named_parameters():
            self.shadow[n] = self.decay * self.shadow[n] + (1.0 - self.decay) * p  # expect: LS011


class AveragedCopy:
    def __init__(self, model, decay=0.999):
        self.decay = decay
        self.module = copy.deepcopy(model)
        for p in self.module.parameters():
            p.requires_grad_(False)

    def update(self, model):
        for ema_p, p in zip(self.module.parameters(), model.parameters()):
            ema_p.mul_(self.decay).add_(p, alpha=1 - self.decay)  # expect: LS011


def update_ema(ema_model, model, decay=0.999):
    for ema_p, p in zip(ema_model.parameters(), model.parameters()):
        ema_p.mul_(decay).add_(p, alpha=1 - decay)  # expect: LS011


def main():
    model = nn.Linear(32, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ema = ModelEMA(model)
    averaged = AveragedCopy(model)
    ema_model = copy.deepcopy(model).requires_grad_(False)
    for _ in range(10000):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.step(model)
        ema.step_named(model)
        averaged.update(model)
        update_ema(ema_model, model)


main()
