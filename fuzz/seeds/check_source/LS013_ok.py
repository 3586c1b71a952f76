import functools
import weakref
from functools import lru_cache

import torch
import torch.nn as nn


@lru_cache(maxsize=128)
def layer_names(model: nn.Module):
    return [name for name, _ in model.named_modules()]


@lru_cache
def bounded_default(x: torch.Tensor):
    return x.sum()


@functools.cache
def vocab(path: str):
    with open(path) as f:
        return f.read().split()


@functools.lru_cache(maxsize=None)
def positional_table(length, dim):
    return torch.zeros(length, dim)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(16, 16)
        self._features = weakref.WeakKeyDictionary()
        self._by_name = {}
        self._recent = {}

    @staticmethod
    @functools.cache
    def table(n: int):
        return list(range(n))

    def forward(self, x):
        out = self.backbone(x)
        self._features[x] = out
        self._by_name["last"] = out.detach()
        self._recent[x] = out.detach()
        return out

    def on_epoch_end(self):
        self._recent.clear()


_by_id = {}
_weak = weakref.WeakValueDictionary()
_bounded = {}


def remember(model, step):
    _by_id[id(model)] = step
    _weak[step] = model
    _bounded[model] = step
    if len(_bounded) > 10:
        _bounded.pop(next(iter(_bounded)))


def local_cache(model, loader):
    cache = {}
    for x in loader:
        cache[x] = model(x).detach()
    return len(cache)


def main(loader):
    for x in loader:
        table = positional_table(128, 16)
        words = vocab("vocab.txt")


class ActivationStats:
    def __init__(self, model):
        self.calls = {}
        for layer in model.children():
            layer.register_forward_hook(self.hook)

    def hook(self, module, inputs, output):
        self.calls[module] = output.shape
