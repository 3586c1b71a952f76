"""A teaching script for self-attention from scratch, run top to bottom (a Kaggle notebook
exported): the epoch's mean loss and accuracy are accumulated from the batch tensors, so the
totals keep the graph of every batch of the epoch and RAM runs out.

Source: jostmey/NakedAttention issue #1, "Memory issues caused by += with pytorch graph objects".
Fix: `e_batch.detach()` and `a_batch.detach()` before accumulating.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
tokens = torch.randint(0, 1000, (4096, 64))
labels = (tokens[:, 0] % 2).long()
loader_train = DataLoader(TensorDataset(tokens, labels), batch_size=32, shuffle=True)


class Attention(nn.Module):
    def __init__(self, vocab=1000, dim=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, 2)

    def forward(self, x):
        h = self.embed(x)
        w = torch.softmax(self.q(h) @ self.k(h).transpose(1, 2) / h.shape[-1] ** 0.5, dim=-1)
        return self.out((w @ self.v(h)).mean(1))


model = Attention()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for epoch in range(100):
    e_train = 0.0
    a_train = 0.0
    for xs_batch, ys_batch in loader_train:
        ls_batch = model(xs_batch)
        e_batch = F.cross_entropy(ls_batch, ys_batch)
        a_batch = (ls_batch.argmax(1) == ys_batch).float().mean()
        optimizer.zero_grad()
        e_batch.backward()
        optimizer.step()
        e_train += e_batch / len(loader_train)  # expect: LS001
        a_train += a_batch / len(loader_train)
    print(f"Epoch: {epoch}, Loss: {e_train:.4f}, Accuracy: {100 * a_train:.1f} %")
