"""Evolutionary training of a small population that keeps a hall of fame of past champions."""

import copy
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Agent:
    def __init__(self, obs_dim=64, act_dim=8):
        self.policy = nn.Sequential(
            nn.Linear(obs_dim, 512), nn.ReLU(),
            nn.Linear(512, 512), nn.ReLU(),
            nn.Linear(512, act_dim),
        )
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=1e-3)

    def train(self, obs, target, steps):
        for _ in range(steps):
            loss = F.cross_entropy(self.policy(obs), target)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    @torch.no_grad()
    def fitness(self, obs, target):
        return (self.policy(obs).argmax(1) == target).float().mean().item()

    @torch.no_grad()
    def mutate(self, scale=0.01):
        for p in self.policy.parameters():
            p.add_(scale * torch.randn_like(p))


class Population:
    def __init__(self, size):
        self.agents = [Agent() for _ in range(size)]
        self.hall_of_fame = []

    def generation(self, obs, target, steps):
        for agent in self.agents:
            agent.train(obs, target, steps)
        scores = [agent.fitness(obs, target) for agent in self.agents]
        best = max(range(len(scores)), key=scores.__getitem__)
        self.hall_of_fame.append(copy.deepcopy(self.agents[best]))
        worst = min(range(len(scores)), key=scores.__getitem__)
        self.agents[worst] = copy.deepcopy(self.agents[best])
        self.agents[worst].mutate()
        return scores[best]


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    teacher = nn.Linear(64, 8)
    population = Population(size=4)
    generations, best = 0, 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        obs = torch.randn(128, 64)
        with torch.no_grad():
            target = teacher(obs).argmax(1)
        best = population.generation(obs, target, steps=16)
        generations += 1
    print(f"{generations} generations, best fitness {best:.2f}, {len(population.hall_of_fame)} champions")


if __name__ == "__main__":
    main()
