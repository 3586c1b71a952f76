"""A trainer plots its loss curve every epoch through a helper that returns the figure; the
caller ignores the figure, so pyplot's registry keeps one open figure per epoch."""

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F


def plot_curve(history, path):
    fig, ax = plt.subplots()
    ax.plot(history)
    fig.savefig(path)
    return fig


def train(model, loader, optimizer, epochs):
    history = []
    for epoch in range(epochs):
        for x, y in loader:
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history.append(loss.item())
        _ = plot_curve(history, f"curve_{epoch}.png")  # expect: LS012
        plot_curve(history, "curve_latest.png")  # expect: LS012
