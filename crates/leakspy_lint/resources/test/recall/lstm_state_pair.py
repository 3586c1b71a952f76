"""A sequence regressor keeps its LSTM's hidden and cell state between batches as two attributes,
written back from the pair the LSTM returns; the first backward then failed ("Trying to backward
through the graph a second time"), so `retain_graph=True` went in, and each batch's graph stayed
linked to every earlier one until the GPU ran out of memory.

Source: a blog post on an LSTM regressor whose memory grew per batch (e-com-net.com, article
1600156146990088192), diagnosed there as the kept graph.
Fix: store detached states, `self.h0, self.c0 = h.detach(), c.detach()`, and drop
`retain_graph=True`.
"""

import torch
import torch.nn as nn


class SeqRegressor(nn.Module):
    def __init__(self, features, hidden=64, layers=1, batch=16):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, layers, batch_first=True)
        self.h0 = torch.zeros(layers, batch, hidden)
        self.c0 = torch.zeros(layers, batch, hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        out, state = self.lstm(x, (self.h0, self.c0))
        (self.h0, self.c0) = state  # expect: LS007
        return self.head(out[:, -1])


def main():
    model = SeqRegressor(8)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(20):
        for _ in range(100):
            x, y = torch.randn(16, 30, 8), torch.randn(16, 1)
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward(retain_graph=True)
            opt.step()
        print(epoch, loss.item())


if __name__ == "__main__":
    main()
