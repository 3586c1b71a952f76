"""A rollout loop fills preallocated per-step slots with the policy's log-probabilities and
values by tuple unpacking, for a loss computed every few rollouts: each slot keeps its step's
graph, across rollouts."""

import torch
import torch.nn as nn


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 32)
        self.pi = nn.Linear(32, 4)
        self.v = nn.Linear(32, 1)

    def forward(self, obs):
        h = torch.tanh(self.body(obs))
        return torch.log_softmax(self.pi(h), -1), self.v(h)


def collect(policy, env, steps, optimizer):
    log_probs = [None] * steps
    values = [None] * steps
    obs = env.reset()
    for step in range(steps):
        log_probs[step], values[step] = policy(obs)  # expect: LS002
        obs, reward, done = env.step(log_probs[step].argmax().item())
        optimizer.step()
    return len(log_probs)
