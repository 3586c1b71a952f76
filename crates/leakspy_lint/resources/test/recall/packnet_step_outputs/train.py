"""Entry point: builds the networks and the trainer."""

import torch
import torch.nn as nn

from models.model_wrapper import ModelWrapper
from trainers.base_trainer import HorovodTrainer


class DepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 3, padding=1))

    def forward(self, x):
        return torch.sigmoid(self.net(x))


class PoseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(6, 16, 3, stride=4), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(16, 2)

    def forward(self, target, context):
        return torch.tanh(self.head(self.net(torch.cat([target, context], 1)).flatten(1)))


class KittiLike(torch.utils.data.Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        return {"rgb": torch.rand(3, 64, 64), "rgb_context": torch.rand(3, 64, 64), "idx": i}


if __name__ == "__main__":
    model = ModelWrapper(DepthNet().cuda(), PoseNet().cuda(), KittiLike())
    HorovodTrainer(max_epochs=20).fit(model)
