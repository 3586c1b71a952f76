import matplotlib.pyplot as plt
import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter


def plot_fitness_progress(fitness_history, path):
    fig, ax = plt.subplots(figsize=(10, 6))  # expect: LS012
    ax.plot(fitness_history)
    ax.set_xlabel("generation")
    fig.savefig(path)


def train(model, loader, optimizer, epochs, out_dir):
    history = []
    for epoch in range(epochs):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
        fig, ax = plt.subplots()  # expect: LS012
        ax.plot(history)
        ax.set_title(f"epoch {epoch}")
        fig.savefig(f"{out_dir}/loss_{epoch}.png")
        print("saved", epoch)


def log_attention(maps, writer, step):
    for i, m in enumerate(maps):
        plt.figure(figsize=(4, 4))  # expect: LS012
        plt.imshow(m.detach().cpu().numpy())
        plt.savefig(f"attn_{step}_{i}.png")
        plt.clf()


def log_images(samples, writer, step):
    for name, img in samples.items():
        fig = plt.figure()  # expect: LS012
        if img is None:
            continue
        plt.imshow(img)
        writer.add_figure(name, fig, step)


def plot_grid(batch, writer, step):
    fig, axes = plt.subplot_mosaic([["a", "b"]])  # expect: LS012
    axes["a"].imshow(batch[0])
    writer.add_figure("grid", fig, step, close=False)


class Monitor:
    def on_validation_batch_end(self, outputs, batch_idx):
        fig, ax = plt.subplots()  # expect: LS012
        ax.hist(outputs.flatten())
        if batch_idx == 0:
            fig.savefig("hist.png")
            plt.close(fig)


for gen in range(25):
    scores = np.random.rand(16)
    fig = plt.figure()  # expect: LS012
    fig.suptitle(f"generation {gen}")
    plt.bar(range(16), scores)
    plt.savefig(f"gen_{gen}.png")
    print("saved", gen)
