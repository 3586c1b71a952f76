"""A DQN agent for a trading environment: `remember()` appends one transition (two state
arrays) per environment step to a plain list that nothing bounds or clears, so host memory
grows for the whole training. The simulator that steps the environment holds the agent it was
given, and calls `remember()` from its episode loop in another file.

Source: golsun/deep-RL-trading issue #1 ("memory leak?"; the author: the memory size was never
limited). Fix: `self.memory = deque(maxlen=memory_size)`.
"""

import random
from collections import deque

import numpy as np
import torch
import torch.nn as nn


class QAgent:
    def __init__(self, n_state, n_action, batch_size=32, gamma=0.95, epsilon=1.0,
                 memory_size=10000):
        self.model = nn.Sequential(nn.Linear(n_state, 64), nn.ReLU(), nn.Linear(64, n_action))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.memory = deque(maxlen=memory_size)
        self.batch_size = batch_size
        self.gamma = gamma
        self.epsilon = epsilon
        self.n_action = n_action

    def act(self, state):
        if random.random() < self.epsilon:
            return random.randrange(self.n_action)
        with torch.no_grad():
            return int(self.model(torch.as_tensor(state, dtype=torch.float32)).argmax())

    def remember(self, state, action, reward, next_state, done):
        self.memory.append((state, action, reward, next_state, done))

    def replay(self):
        batch = random.sample(self.memory, min(len(self.memory), self.batch_size))
        states = torch.as_tensor(np.stack([b[0] for b in batch]), dtype=torch.float32)
        targets = self.model(states).detach().clone()
        for i, (_, action, reward, next_state, done) in enumerate(batch):
            target = reward
            if not done:
                nxt = torch.as_tensor(next_state, dtype=torch.float32)
                target += self.gamma * float(self.model(nxt).max().detach())
            targets[i, action] = target
        loss = nn.functional.mse_loss(self.model(states), targets)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
