import matplotlib.pyplot as plt
import numpy as np
import wandb
from matplotlib.figure import Figure
from torch.utils.tensorboard import SummaryWriter


def plot_progress(history, path):
    fig, ax = plt.subplots()
    ax.plot(history)
    fig.savefig(path)
    plt.close(fig)


def make_figure(history):
    # Returned to the caller, who owns it.
    fig, ax = plt.subplots()
    ax.plot(history)
    return fig


def train(model, loader, epochs, writer: SummaryWriter):
    history = []
    for epoch in range(epochs):
        history.append(model.fit(loader))
        # add_figure closes the figure by default.
        fig, ax = plt.subplots()
        ax.plot(history)
        writer.add_figure("loss", fig, epoch)

        fig2 = plt.figure()
        try:
            plt.plot(history)
            fig2.savefig(f"loss_{epoch}.png")
        finally:
            plt.close(fig2)

        plt.figure(figsize=(3, 3))
        plt.plot(history)
        plt.savefig("latest.png")
        plt.close()

        # Reuses figure number 1 every time.
        plt.figure(1)
        plt.clf()
        plt.plot(history)
        fig3, ax3 = plt.subplots(num="progress", clear=True)
        ax3.plot(history)

        # Not registered with pyplot: freed like any object.
        f = Figure()
        f.add_subplot().plot(history)
        f.savefig("obj.png")

        fig4, ax4 = plt.subplots()
        ax4.plot(history)
        if epoch % 2:
            fig4.savefig("a.png")
            plt.close(fig4)
        else:
            plt.close("all")


def plot_all(metrics):
    for name, values in metrics.items():
        plt.figure()
        plt.plot(values)
        plt.savefig(f"{name}.png")
    plt.close("all")


def log_table(rows):
    figs = []
    for r in rows:
        fig, ax = plt.subplots()
        ax.plot(r)
        figs.append(fig)
    return figs


def show_samples(samples):
    for s in samples:
        plt.figure()
        plt.imshow(s)
        plt.show()


def save_and_close(fig, path):
    fig.savefig(path)
    plt.close(fig)


def render_epoch(model, epochs):
    for epoch in range(epochs):
        fig, ax = plt.subplots()
        ax.plot(model.curve())
        save_and_close(fig, f"e{epoch}.png")


def evaluate(model, data):
    fig, ax = plt.subplots()
    ax.plot(model(data))
    fig.savefig("eval.png")


def log_wandb(history, step):
    fig, ax = plt.subplots()
    ax.plot(history)
    wandb.log({"loss": wandb.Image(fig)}, step=step)
    plt.close(fig)


def plot_each_epoch(history, epochs):
    for epoch in range(epochs):
        # Closes the previous iteration's figure: at most one is open.
        plt.close("all")
        fig, ax = plt.subplots()
        ax.plot(history[: epoch + 1])
        fig.savefig("progress.png")


def log_confusion(matrix, step):
    plt.close("all")
    plt.figure()
    plt.imshow(matrix)
    plt.savefig(f"confusion_{step}.png")


def plot_fitness_progress(history):
    plt.figure(figsize=(10, 5))
    plt.plot(history)
    plt.savefig("fitness.png")


def evolve(population, generations):
    fitness_history = []
    for gen in range(generations):
        fitness_history.append(max(a.score() for a in population))
        if (gen + 1) % 5 == 0:
            plot_fitness_progress(fitness_history)
            # The caller closes what the helper left open.
            plt.close("all")


def configure(style):
    # A one-off figure in a function that is neither per-step nor a plotting helper.
    fig = plt.figure()
    fig.set_facecolor(style)
    fig.savefig("style.png")
