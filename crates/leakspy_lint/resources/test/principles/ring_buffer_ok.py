# A ring buffer: it appends only while it holds fewer than `capacity` transitions, then
# overwrites the oldest in place, so it never keeps more than `capacity`.
import torch.nn as nn


class ReplayBuffer:
    def __init__(self, capacity):
        self.buffer = []
        self.capacity = capacity
        self.pos = 0

    def push(self, transition):
        if len(self.buffer) < self.capacity:
            self.buffer.append(transition)
        else:
            self.buffer[self.pos] = transition
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
