# A module-level list pushed in one hook and never popped grows with every forward pass.
import numpy as np
import torch

FLOPS = []


class Profiler:
    def start(self, model):
        def pre_hook(module, inputs):
            FLOPS.append(np.zeros(16))  # expect: LS014

        model.register_forward_pre_hook(pre_hook)
