"""A LightningModule keeps each training step's output dict to average the loss at the end of
the epoch, as the Lightning 2 migration guide shows: the loss in the dict keeps its graph
until the epoch ends."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch import LightningModule


class Classifier(LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(28 * 28, 128), nn.ReLU(), nn.Linear(128, 10))
        self.training_step_outputs = []

    def forward(self, x):
        return self.net(x.flatten(1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.training_step_outputs.append({"loss": loss, "batch": batch_idx})  # expect: LS002
        return loss

    def on_train_epoch_end(self):
        losses = torch.stack([o["loss"] for o in self.training_step_outputs])
        self.log("train_loss_epoch", losses.mean())
        self.training_step_outputs.clear()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)
