# A replay buffer that counts a write position but appends every transition anyway: the
# position is never used to overwrite, so the list keeps every step.
import torch.nn as nn


class ReplayBuffer:
    def __init__(self, capacity):
        self.buffer = []
        self.capacity = capacity
        self.pos = 0

    def push(self, transition):
        self.buffer.append(transition)  # expect: LS014
        self.pos = (self.pos + 1) % self.capacity


def train(env, opt, steps):
    model = nn.Linear(4, 2)
    buffer = ReplayBuffer(10_000)
    obs = env.reset()
    for _ in range(steps):
        out = model(obs)
        out.mean().backward()
        opt.step()
        buffer.push((obs, out.detach()))
        obs = env.step(out.detach())
