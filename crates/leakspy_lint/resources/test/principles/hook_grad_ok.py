# A hook runs in the grad mode of the calls that trigger it: registered and triggered inside a
# function that runs the model only under `no_grad`, it receives outputs without a graph.
import torch
import torch.nn as nn


def get_embeddings(model, batches):
    embeddings = []

    def hook(module, inputs, output):
        embeddings.append(output)

    handles = []
    for module in model.modules():
        if isinstance(module, nn.Linear):
            handles.append(module.register_forward_hook(hook))
    model.eval()
    with torch.no_grad():
        for x in batches:
            model(x)
    for h in handles:
        h.remove()
    return embeddings


class Features:
    def __init__(self):
        self.outputs = []

    def process(self, images):
        def keep(module, x, y):
            self.outputs.append(y)

        net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        net[0].register_forward_hook(keep)
        for image in images:
            with torch.no_grad():
                net(image)
