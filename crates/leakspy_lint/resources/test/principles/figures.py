# A figure per evaluation of a training loop, never closed.
import matplotlib.pyplot as plt
import torch.nn as nn


def train(envs, opt, episodes):
    model = nn.Linear(4, 2)
    for episode in range(episodes):
        obs = envs.reset()
        loss = model(obs).mean()
        loss.backward()
        opt.step()
        fig, ax = plt.subplots()  # expect: LS012
        ax.plot(obs)
        fig.savefig(f"episode_{episode}.png")
