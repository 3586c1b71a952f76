import copy

import numpy as np
import torch
import torch.nn as nn


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(64, 8)

    def forward(self, x):
        return self.net(x)


class DDPGAgent:
    def __init__(self):
        self.actor = Actor()
        self.critic = nn.Linear(72, 1)
        self.noise_scale = 0.1

    def clone(self):
        new_agent = DDPGAgent()
        new_agent.actor.load_state_dict(copy.deepcopy(self.actor.state_dict()))
        new_agent.critic.load_state_dict(copy.deepcopy(self.critic.state_dict()))
        return new_agent


class ERLTrainer:
    def __init__(self, population):
        self.population = population
        self.hall_of_fame = []
        self.snapshots = {}
        self.best_agent = None

    def run(self, generations):
        for generation in range(generations):
            fitness = [agent.evaluate() for agent in self.population]
            best_idx = int(np.argmax(fitness))
            self.hall_of_fame.append(self.population[best_idx].clone())  # expect: LS015
            self.snapshots[generation] = copy.deepcopy(self.population[best_idx].actor)  # expect: LS015
            self.best_agent = self.population[best_idx].clone()


def train(model, loader, optimizer, epochs):
    checkpoints = []
    for epoch in range(epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        snapshot = copy.deepcopy(model.state_dict())
        checkpoints.append(snapshot)  # expect: LS015
    return checkpoints


class EMA:
    def __init__(self, model: nn.Module):
        self.model = model
        self.history = []

    def record(self):
        self.history.append(copy.deepcopy(self.model))  # expect: LS015
