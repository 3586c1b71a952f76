"""An exponential moving average of a model's weights, updated in place after each optimizer
step. The update reads the live parameters, which require grad, with autograd on: each in-place
`lerp_` records a node, so every EMA weight becomes part of a graph that links each step to the
one before, and the chain grows for the whole run.

Source: ultralytics/ultralytics pull request #25315, "Faster `ModelEMA` update with batched
`_foreach_lerp_`": the review flagged that dropping `.detach()` on the model's tensors "record[s]
EMA updates in autograd, making EMA tensors part of an ever-growing graph". Fix: update under
`torch.no_grad()` (as `ModelEMA.update` does) from detached tensors.
"""

import copy
import math

import torch


class ModelEMA:
    def __init__(self, model, decay=0.9999, tau=2000):
        self.ema = copy.deepcopy(model).eval()
        self.updates = 0
        self.decay = lambda x: decay * (1 - math.exp(-x / tau))
        for p in self.ema.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        self.updates += 1
        d = self.decay(self.updates)
        for ema_p, p in zip(self.ema.parameters(), model.parameters()):
            if ema_p.dtype.is_floating_point:
                ema_p.lerp_(p.detach(), 1.0 - d)
