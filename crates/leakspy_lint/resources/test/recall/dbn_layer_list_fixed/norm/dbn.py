"""Decorrelated batch normalization for a VGG on CIFAR-10: the layer keeps running estimates of
the batch mean and whitening matrix, updated in `forward` from statistics of its input. The
input is the previous convolution's output, so each update links the running estimates to the
step's graph and, through their previous values, to every step before: GPU memory grew each
iteration until the run died.

Source: huangleiBuaa/IterNorm-pytorch issue #1 ("memory leak with DBN"); the layer is used
through `nn.Sequential` in the model file.
Fix: update the running estimates from detached statistics (`mean.detach()`, `wm.detach()`).
"""

import torch
import torch.nn as nn


class DBN(nn.Module):
    def __init__(self, num_features, num_channels=16, eps=1e-5, momentum=0.1):
        super().__init__()
        self.num_features = num_features
        self.num_channels = num_channels
        self.eps = eps
        self.momentum = momentum
        self.num_groups = num_features // num_channels
        self.register_buffer("running_mean", torch.zeros(self.num_groups, num_channels, 1))
        self.register_buffer(
            "running_projection", torch.eye(num_channels).expand(self.num_groups, -1, -1).clone()
        )

    def forward(self, x):
        n, c, h, w = x.shape
        xg = x.transpose(0, 1).reshape(self.num_groups, self.num_channels, -1)
        if self.training:
            mean = xg.mean(-1, keepdim=True)
            xc = xg - mean
            sigma = xc @ xc.transpose(1, 2) / xc.shape[-1]
            sigma = sigma + self.eps * torch.eye(self.num_channels)
            u, eig, _ = torch.linalg.svd(sigma)
            wm = u @ torch.diag_embed(eig.rsqrt()) @ u.transpose(1, 2)
            self.running_mean = (1.0 - self.momentum) * self.running_mean + self.momentum * mean.detach()
            self.running_projection = (1.0 - self.momentum) * self.running_projection + self.momentum * wm.detach()
        else:
            xc = xg - self.running_mean
            wm = self.running_projection
        out = wm @ xc
        return out.reshape(c, n, h, w).transpose(0, 1)
