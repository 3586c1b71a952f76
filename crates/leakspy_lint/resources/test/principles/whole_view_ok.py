# The same outputs with an axis added: `out[:, None, :]` shows every element of `out`.
import numpy as np
import torch


def collect(model, loader):
    maps = []
    with torch.no_grad():
        for x in loader:
            out = model(x).numpy()
            maps.append(out[:, None, :])
            maps.append(out[..., None])
    return np.concatenate(maps, axis=1)
