# The same averages kept right: `copy_` that replaces the average (one step's graph at most, and
# here none), the update under no_grad, a decayed average of detached weights, and a copy of the
# model updated from its parameters' data or under no_grad.
import copy

import torch
import torch.nn as nn


class ModelEMA:
    def __init__(self, model, decay=0.999):
        self.decay = decay
        self.params = [p.detach().clone() for p in model.parameters()]
        self.shadow = {n: p.detach().clone() for n, p in model.named_parameters()}
        self.backup = [p.detach().clone() for p in model.parameters()]

    def store(self, model):
        for b, p in zip(self.backup, model.parameters()):
            b.copy_(p.data)

    @torch.no_grad()
    def step(self, model):
        for ema_p, p in zip(self.params, model.parameters()):
            ema_p.copy_(ema_p * self.decay + p * (1.0 - self.decay))

    def step_named(self, model):
        for n, p in model.named_parameters():
            self.shadow[n] = self.decay * self.shadow[n] + (1.0 - self.decay) * p.detach()


class AveragedCopy:
    def __init__(self, model, decay=0.999):
        self.decay = decay
        self.module = copy.deepcopy(model)
        for p in self.module.parameters():
            p.requires_grad_(False)

    def update(self, model):
        for ema_p, p in zip(self.module.parameters(), model.parameters()):
            ema_p.mul_(self.decay).add_(p.data, alpha=1 - self.decay)


def update_ema(ema_model, model, decay=0.999):
    with torch.no_grad():
        for ema_p, p in zip(ema_model.parameters(), model.parameters()):
            ema_p.mul_(decay).add_(p, alpha=1 - decay)


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
        ema.store(model)
        ema.step(model)
        ema.step_named(model)
        averaged.update(model)
        update_ema(ema_model, model)


main()
