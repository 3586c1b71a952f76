"""A model that keeps its attention maps for visualisation when asked: with the flag on,
`forward` appends every step's maps, which carry the graph, to a list on the module."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim, keep_maps=False):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.keep_maps = keep_maps
        self.last_map = None

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        attn = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        if self.keep_maps:
            self.last_map = attn.detach()
        return attn @ v


def train(loader, steps):
    layer = Attention(32, keep_maps=True)
    head = nn.Linear(32, 2)
    optimizer = torch.optim.Adam(list(layer.parameters()) + list(head.parameters()))
    for step, (x, y) in zip(range(steps), loader):
        loss = F.cross_entropy(head(layer(x).mean(1)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return layer.last_map
