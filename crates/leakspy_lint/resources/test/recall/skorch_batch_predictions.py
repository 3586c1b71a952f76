"""A skorch classifier with a custom scoring callback that keeps each batch's predictions to
compute an epoch-level AUC. The predictions stay on the GPU, and the callback's list is never
reset, so it holds every batch of every epoch.

Source: skorch-dev/skorch issue #509, "Epoch scoring can use up a lot of GPU memory" (the
`EpochScoring` callback keeps `y_pred` as returned by the module, on the GPU; "I fixed it by
sending `y_pred` to cpu"). Fix: keep `y_pred.detach().cpu()` and reset the list every epoch.
"""

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from skorch import NeuralNetClassifier
from skorch.callbacks import Callback


class BatchAUC(Callback):
    def initialize(self):
        self.y_preds = []
        self.y_trues = []
        return self

    def on_batch_end(self, net, batch=None, training=None, y_pred=None, **kwargs):
        if training:
            return
        self.y_preds.append(y_pred)  # expect: LS004|LS014|LS002
        self.y_trues.append(batch[1])  # expect: LS014

    def on_epoch_end(self, net, **kwargs):
        probs = torch.cat(self.y_preds).softmax(1)[:, 1].cpu().numpy()
        auc = roc_auc_score(torch.cat(self.y_trues).numpy(), probs)
        net.history.record("valid_auc", auc)


class Tagger(torch.nn.Module):
    def __init__(self, n_features=20000, n_hidden=512):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(n_features, n_hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(n_hidden, 2))

    def forward(self, X):
        return self.net(X)


if __name__ == "__main__":
    X = np.random.rand(20000, 20000).astype(np.float32)
    y = (X[:, 0] > 0.5).astype(np.int64)
    net = NeuralNetClassifier(Tagger, max_epochs=200, lr=0.05, device="cuda",
                              callbacks=[("batch_auc", BatchAUC())])
    net.fit(X, y)
