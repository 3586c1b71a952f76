"""Trains an autoencoder and renders a live loss plot for a dashboard every few steps."""

import io
import os
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

plt.rcParams["figure.max_open_warning"] = 0  # silence the "too many figures" warning


def plot_losses(losses):
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(losses, lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("reconstruction loss")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    model = nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 32),
        nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 784),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses, latest_png = [], b""
    steps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        x = torch.rand(64, 784)
        loss = F.mse_loss(model(x), x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        steps += 1
        if steps % 10 == 0:
            latest_png = plot_losses(losses)
    print(f"{steps} steps, last plot {len(latest_png)} bytes")


if __name__ == "__main__":
    main()
