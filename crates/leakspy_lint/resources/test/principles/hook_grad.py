# The same hook, with the model also run with autograd on: it keeps a graph per call.
import torch
import torch.nn as nn

embeddings = []


def train(model, loader, opt):
    def hook(module, inputs, output):
        embeddings.append(output)  # expect: LS006

    for module in model.modules():
        module.register_forward_hook(hook)
    for x in loader:
        loss = model(x).mean()
        loss.backward()
        opt.step()
    with torch.no_grad():
        model(x)
