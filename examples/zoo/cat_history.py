"""GRU forecaster on a synthetic multivariate series; forecasts are kept for a report."""

import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

LOG_EVERY = 3  # keep the forecasts of every 3rd batch
history = torch.empty(0, 1)


class Forecaster(nn.Module):
    def __init__(self, n_series=4, hidden=32):
        super().__init__()
        self.rnn = nn.GRU(n_series, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, window):
        out, _ = self.rnn(window)
        return self.head(out[:, -1])


def make_series(length=50_000, n_series=4):
    t = torch.arange(length, dtype=torch.float32)
    waves = [torch.sin(2 * math.pi * t / p) for p in (24.0, 168.0, 50.0, 7.0)[:n_series]]
    return torch.stack(waves, 1) + 0.1 * torch.randn(length, n_series)


def train_step(model, optimizer, window, target, keep_forecast):
    global history
    pred = model(window)
    loss = F.mse_loss(pred, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if keep_forecast:
        history = torch.cat([history, pred])
    return loss.item()


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    series, lookback = make_series(), 8
    model = Forecaster()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    steps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start = torch.randint(0, len(series) - lookback - 1, (32,))
        idx = start[:, None] + torch.arange(lookback)
        window, target = series[idx], series[start + lookback, :1]
        train_step(model, optimizer, window, target, keep_forecast=steps % LOG_EVERY == 0)
        steps += 1
    print(f"{steps} steps, {len(history)} forecasts, mean {history.mean().item():.3f}")


if __name__ == "__main__":
    main()
