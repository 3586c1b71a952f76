# A copy of a population's member kept every generation: a whole agent each time.
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
    def __init__(self, population):
        self.population = population
        self.archive = []

    def run(self, generations, evaluate):
        for generation in range(generations):
            scores = [evaluate(a) for a in self.population]
            best = max(range(len(scores)), key=scores.__getitem__)
            self.archive.append(self.population[best].clone())  # expect: LS015
