# A module-level list pushed in one hook and popped in its pair (a method's closure) is a stack:
# as deep as the modules nest, whatever the number of steps.
import numpy as np
import torch

FLOPS = []


class Profiler:
    def start(self, model):
        def pre_hook(module, inputs):
            FLOPS.append(np.zeros(16))

        def post_hook(module, inputs, output):
            if FLOPS:
                module.flops = FLOPS.pop().sum()

        model.register_forward_pre_hook(pre_hook)
        model.register_forward_hook(post_hook)
