from collections import deque

import torch
import torch.nn as nn


class Agent:
    def __init__(self, max_history=1000):
        self.q = nn.Linear(4, 2)
        self.losses = deque(maxlen=max_history)
        self.rewards = deque([], 1000)
        self.epoch_losses = []
        self.recent = []
        self.window = []
        self.trimmed = []
        self.metrics = {}
        self.by_epoch = {}
        self.outputs = []
        self.best = None

    def update(self, batch, step):
        loss = self.q(batch).pow(2).mean()
        loss.backward()
        self.losses.append(loss.item())
        self.rewards.append(float(batch.sum()))
        self.epoch_losses.append(loss.item())
        self.recent.append(loss.item())
        if len(self.recent) > 100:
            self.recent.pop(0)
        self.window.append(loss.item())
        self.window = self.window[-50:]
        self.trimmed.append(loss.item())
        # A fixed set of keys: overwritten every step.
        self.metrics["loss"] = loss.item()
        self.metrics[f"loss/{self.q.__class__.__name__}"] = loss.item()
        # Carries a graph: LS002 reports it, not this rule.
        self.outputs.append(loss)

    def on_epoch_end(self, epoch):
        self.by_epoch[epoch] = sum(self.epoch_losses) / max(len(self.epoch_losses), 1)
        self.epoch_losses.clear()
        while len(self.trimmed) > 1000:
            self.trimmed.pop(0)

    def fit(self, loader, epochs):
        history = []
        for epoch in range(epochs):
            for batch in loader:
                history.append(self.update(batch, 0))
            self.on_epoch_end(epoch)
        return history


class Env:
    def __init__(self):
        self.episode_rewards = []
        self.t = 0

    def reset(self):
        self.episode_rewards = []
        self.t = 0
        return torch.zeros(4)

    def step(self, action):
        self.episode_rewards.append(float(action.sum()))
        self.t += 1
        return torch.zeros(4), 0.0


class Loader:
    def __init__(self, files):
        self.samples = []
        for f in files:
            self.samples.append(torch.load(f))

    def load(self, more):
        for f in more:
            self.samples.append(torch.load(f))


class Evolution:
    def __init__(self):
        self.fitness_history = []

    def evolve(self, generations, population):
        for generation in range(generations):
            scores = [agent.evaluate() for agent in population]
            self.fitness_history.append(max(scores))


class Learner:
    def __init__(self):
        self.net = nn.Linear(4, 4)
        self.loss_history = []

    def update(self, batch):
        loss = self.net(batch).sum()
        loss.backward()
        self.loss_history.append(loss.item())


def train(learner, batches, epochs):
    for epoch in range(epochs):
        for b in batches:
            learner.update(b)
        # Reset by its user, outside the class.
        learner.loss_history.clear()
