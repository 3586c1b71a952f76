# A memory tracer whose forward hook keeps each output itself, graph and all: one forward
# pass's saved activations per call, for the life of the tracer.
import torch.nn as nn


class Tracer:
    def __init__(self, model):
        self.outputs = []
        model.register_forward_hook(self.hook)

    def hook(self, module, inputs, output):
        self.outputs.append(output.flatten(1))  # expect: LS006


def train(model, loader, opt):
    tracer = Tracer(model)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return tracer
