import functools
import weakref
from functools import cache, lru_cache

import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(16, 16)
        self._features = {}

    @functools.cache  # expect: LS013
    def features(self, x):
        return self.backbone(x)

    def forward(self, x):
        if x in self._features:
            return self._features[x]
        out = self.backbone(x)
        self._features[x] = out  # expect: LS013
        return out


@lru_cache(maxsize=None)  # expect: LS013
def layer_names(model: nn.Module):
    return [name for name, _ in model.named_modules()]


@cache  # expect: LS013
def normalized(x: torch.Tensor):
    return (x - x.mean()) / x.std()


@functools.lru_cache(None)  # expect: LS013
def embed(tokens):
    return tokens * 2


_seen_models = set()
_stats = {}


def batch_stats(batch: torch.Tensor):
    _stats[batch] = (batch.mean(), batch.std())  # expect: LS013
    return _stats[batch]


def register(model):
    _seen_models.add(model)  # expect: LS013


def main(loader):
    net = nn.Linear(4, 4)
    for x in loader:
        y = net(x)
        z = embed(y)
        batch_stats(z.detach().cpu())
        register(net)
