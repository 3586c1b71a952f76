# An autoregressive decode keeps a view of each step's output and stacks them when the loop
# ends: the list is a local the function only reduces into a copy and never hands out, and the
# loop trains nothing, so the bases die with the call.
import torch


def decode(model, context, num_decode_steps):
    outputs = []
    last = context
    with torch.no_grad():
        for _ in range(num_decode_steps):
            out = model(last)
            outputs.append(out[:, -1, ...])
            last = out[:, -1:, ...]
    return torch.stack(outputs, dim=1)
