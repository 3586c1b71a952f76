"""A LightningModule (Lightning 2.x) that collects its validation outputs for an epoch-end
metric but never empties the list: every validation epoch adds its batches to the last ones, on
the device, for the whole run.

Source: ray-project/ray pull request #38039 (moving a test module from `validation_epoch_end` to
`on_validation_epoch_end`): the review asked for `self.validation_step_outputs.clear()` at the end
of the validation epoch, as Lightning's migration (Lightning-AI/pytorch-lightning #16520,
"Remove memory-retaining epoch-end hooks") requires. Fix: clear the list there.
"""

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torchmetrics.functional import accuracy


class MNISTClassifier(pl.LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256),
                                       torch.nn.ReLU(), torch.nn.Linear(256, 10))
        self.validation_step_outputs = []

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = accuracy(logits.argmax(1), y, task="multiclass", num_classes=10)
        self.validation_step_outputs.append({"val_loss": loss, "val_accuracy": acc})  # expect: LS014|LS004

    def on_validation_epoch_end(self):
        avg_loss = torch.stack([x["val_loss"] for x in self.validation_step_outputs]).mean()
        avg_acc = torch.stack([x["val_accuracy"] for x in self.validation_step_outputs]).mean()
        self.log("ptl/val_loss", avg_loss)
        self.log("ptl/val_accuracy", avg_acc)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
