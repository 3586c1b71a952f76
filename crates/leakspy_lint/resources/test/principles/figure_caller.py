# A plotting function whose caller never closes what it opens; another `plot` (the axes')
# followed by a close is a different function.
import matplotlib.pyplot as plt
import torch.nn as nn


def plot(values):
    fig, ax = plt.subplots()
    ax.plot(values)
    return ax


def summary(values):
    fig, ax = plt.subplots()
    ax.plot(values)
    plt.close(fig)


def train(loader, model, opt):
    for step, (x, y) in enumerate(loader):
        out = model(x)
        loss = nn.functional.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        plot(out.detach().numpy())  # expect: LS012
        plt.savefig(f"step_{step}.png")
