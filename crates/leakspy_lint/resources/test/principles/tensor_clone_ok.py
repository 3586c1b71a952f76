# A file with a model class that has a `clone` method: a tensor's `.clone()` beside it is no
# model copy (a mask drawn per generation, kept for the next round's split).
import torch
import torch.nn as nn


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.policy = nn.Linear(16, 4)

    def clone(self):
        twin = Agent()
        twin.load_state_dict(self.state_dict())
        return twin


class Evolution:
    def __init__(self, population, sampler):
        self.population = population
        self.sampler = sampler
        self.masks = []

    def run(self, generations, evaluate):
        for generation in range(generations):
            mask = self.sampler.draw(len(self.population))["mask"]
            scores = [evaluate(a, mask) for a in self.population]
            self.masks.append(mask.clone())
