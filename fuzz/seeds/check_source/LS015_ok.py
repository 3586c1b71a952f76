import copy
from collections import deque

import numpy as np
import torch
import torch.nn as nn


class Agent:
    def __init__(self):
        self.policy = nn.Linear(8, 2)

    def clone(self):
        return copy.deepcopy(self)


class Evolution:
    def __init__(self, size):
        self.population = [Agent() for _ in range(size)]
        self.best_agent = None
        self.best_fitness = -float("inf")
        self.elites = deque(maxlen=5)
        self.archive = []

    def evolve(self, generations):
        for generation in range(generations):
            fitness = [float(a.policy.weight.sum()) for a in self.population]
            best = int(np.argmax(fitness))
            # A single best copy, replaced.
            if fitness[best] > self.best_fitness:
                self.best_fitness = fitness[best]
                self.best_agent = copy.deepcopy(self.population[best])
            # Bounded.
            self.elites.append(self.population[best].clone())
            # Built per generation, bounded by the population size, then replaces it.
            new_population = []
            for i in range(len(self.population)):
                new_population.append(self.population[i].clone())
            self.population = new_population
            # Cleared below.
            self.archive.append(copy.deepcopy(self.population[best]))
            self.save(generation)

    def save(self, generation):
        torch.save([a.policy.state_dict() for a in self.archive], f"gen_{generation}.pt")
        self.archive.clear()


def track(model, loader, optimizer):
    grads = []
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        # Copies of tensors, not modules (other rules' business).
        grads.append(copy.deepcopy(x))
    return grads


def ensemble(models):
    copies = []
    for m in models:
        copies.append(copy.deepcopy(m))
    return copies
