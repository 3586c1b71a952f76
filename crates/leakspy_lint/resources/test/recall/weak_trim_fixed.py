"""An agent keeps a replay of recent transitions, trimming one entry per episode while it adds
one per step: the trim is weaker than the growth, so the list grows without bound."""

import random
from collections import deque

import torch
import torch.nn as nn
import torch.nn.functional as F


class Agent:
    def __init__(self, policy, capacity=10_000):
        self.policy = policy
        self.capacity = capacity
        self.transitions = deque(maxlen=capacity)
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=3e-4)

    def learn(self):
        batch = random.sample(self.transitions, min(32, len(self.transitions)))
        obs = torch.stack([t[0] for t in batch])
        target = torch.tensor([t[2] for t in batch])
        loss = F.mse_loss(self.policy(obs).max(1).values, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def run(self, env, episodes):
        for episode in range(episodes):
            obs, done = env.reset(), False
            while not done:
                with torch.no_grad():
                    action = self.policy(obs).argmax().item()
                next_obs, reward, done = env.step(action)
                self.transitions.append((obs, action, reward))
                self.learn()
                obs = next_obs
