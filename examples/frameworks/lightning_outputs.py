"""A LightningModule that keeps every training step's loss, the way the
Lightning docs' `training_step_outputs` pattern does, in two versions:

    python lightning_outputs.py leak|healthy [SECONDS]

`leak` appends the loss itself (a tensor that carries its autograd
graph) to `self.training_step_outputs` and never clears it: one epoch
spans the whole run, so `on_train_epoch_end` never comes. `healthy`
keeps `loss.detach()` and clears the list every 50 steps, as a logging
hook would. A small MLP classifier on random data, CPU, no downloads; it
trains for SECONDS of its own CPU time (default 25; a busy machine
stretches the run, it does not cut its work) and prints how many
optimizer steps Lightning made.
"""

import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

import lightning as L


class RandomBatches(Dataset):
    # Long enough (62,500 steps of 32) that the one epoch outlasts SECONDS of
    # CPU time on a fast machine too: 6,250 ended in 17 s, and its
    # `on_train_epoch_end` cleared what the leak keeps before the probe
    # named it.
    def __init__(self, n=2000000, dim=64, classes=10):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(4096, dim, generator=g)
        self.y = torch.randint(0, classes, (4096,), generator=g)
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        j = i % len(self.x)
        return self.x[j], self.y[j]


class Classifier(L.LightningModule):
    def __init__(self, keep_graphs, dim=64, hidden=256, classes=10):
        super().__init__()
        self.keep_graphs = keep_graphs
        self.net = torch.nn.Sequential(
            torch.nn.Linear(dim, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, classes),
        )
        self.training_step_outputs = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)  # FORWARD_LINE
        if self.keep_graphs:
            self.training_step_outputs.append(loss)  # LEAK_LINE
        else:
            self.training_step_outputs.append(loss.detach())
            if len(self.training_step_outputs) >= 50:
                self.training_step_outputs.clear()
        return loss

    def on_train_epoch_end(self):
        self.training_step_outputs.clear()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


class StopAfter(L.Callback):
    """Ends training after a number of seconds of its CPU time."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.t0 = None

    def on_train_batch_end(self, trainer, *args):
        if self.t0 is None:
            self.t0 = time.process_time()
        if time.process_time() - self.t0 >= self.seconds:
            trainer.should_stop = True


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "leak"
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 25.0
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Classifier(keep_graphs=(mode == "leak"))
    trainer = L.Trainer(
        max_epochs=1, accelerator="cpu", devices=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        callbacks=[StopAfter(seconds)],
    )
    loader = DataLoader(RandomBatches(), batch_size=32, num_workers=0)
    trainer.fit(model, loader)
    print("optimizer steps:", trainer.global_step, flush=True)


if __name__ == "__main__":
    main()
