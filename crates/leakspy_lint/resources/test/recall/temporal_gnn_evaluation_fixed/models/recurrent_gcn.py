"""A stack of graph convolutional GRU layers with a linear read-out."""

import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv


class GConvGRU(torch.nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv_z = GCNConv(in_channels + out_channels, out_channels)
        self.conv_r = GCNConv(in_channels + out_channels, out_channels)
        self.conv_h = GCNConv(in_channels + out_channels, out_channels)
        self.out_channels = out_channels

    def forward(self, x, edge_index, edge_weight, h):
        if h is None:
            h = torch.zeros(x.shape[0], self.out_channels)
        z = torch.sigmoid(self.conv_z(torch.cat([x, h], 1), edge_index, edge_weight))
        r = torch.sigmoid(self.conv_r(torch.cat([x, h], 1), edge_index, edge_weight))
        h_tilde = torch.tanh(self.conv_h(torch.cat([x, h * r], 1), edge_index, edge_weight))
        return z * h + (1 - z) * h_tilde


class RecurrentGCN(torch.nn.Module):
    def __init__(self, node_features, hidden, layers):
        super().__init__()
        self.cells = torch.nn.ModuleList(
            [GConvGRU(node_features if i == 0 else hidden, hidden) for i in range(layers)])
        self.linear = torch.nn.Linear(hidden, 1)

    def forward(self, x, edge_index, edge_weight, h=None):
        hs = []
        for i, cell in enumerate(self.cells):
            x = cell(x, edge_index, edge_weight, None if h is None else h[i])
            hs.append(x)
        return self.linear(F.relu(x)).squeeze(-1), torch.stack(hs)
