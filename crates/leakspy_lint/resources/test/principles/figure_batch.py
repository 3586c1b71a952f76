# A figure per sample of the batch, made by a comprehension: `plt.close()` closes only the
# current one, and handing each to a function closes none; a figure whose method is called
# and the result dropped (`plt.figure().clear()`) stays open.
import matplotlib.pyplot as plt
import torch.nn as nn


def log_batch(images):
    figs = [plt.subplots() for _ in images]  # expect: LS012
    for (fig, ax), image in zip(figs, images):
        ax.imshow(image)
        fig.savefig("sample.png")
    plt.close()


def clear_figures():
    plt.figure().clear()  # expect: LS012


def train(loader, model, opt):
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log_batch(x[:4, 0].numpy())
        clear_figures()
