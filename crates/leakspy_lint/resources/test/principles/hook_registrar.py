# A hook that keeps what it is given each time it fires: one activation per forward pass.
import torch
import torch.nn as nn


class Recorder:
    def __init__(self, model):
        self.activations = []
        model.register_forward_hook(self.record_hook)

    def record_hook(self, module, inputs, output):
        self.activations.append(output.detach().cpu())  # expect: LS014


def train(loader, model, opt):
    recorder = Recorder(model)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return recorder
