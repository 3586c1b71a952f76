# The same tracer keeping only numbers about each output (its size in bytes, its element count,
# its rank): tensor methods that return a number hold no tensor and no graph.
import torch.nn as nn


class Tracer:
    def __init__(self, model):
        self.bytes = []
        self.numels = []
        self.ranks = []
        model.register_forward_hook(self.hook)

    def hook(self, module, inputs, output):
        self.bytes.append(output.element_size() * output.nelement())
        self.numels.append(output.numel())
        self.ranks.append(output.dim())


def train(model, loader, opt):
    tracer = Tracer(model)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return tracer
