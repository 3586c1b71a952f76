"""Sequence tagging where each batch is wrapped in linked Episode/Step objects."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Episode:
    def __init__(self, frames):
        self.steps = []
        self.frames = frames

    def add(self, obs, label):
        step = Step(self, obs, label)
        self.steps.append(step)
        return step


class Step:
    def __init__(self, episode, obs, label):
        self.episode = episode  # back-reference: Episode <-> Step form a cycle
        self.obs = obs
        self.label = label
        self.raw = bytes(obs.numel() * 4)  # raw sensor payload


def make_episode(length=16, dim=256):
    frames = torch.randn(length, dim)
    episode = Episode(frames)
    for t in range(length):
        episode.add(frames[t].clone(), int(frames[t, 0] > 0))
    return episode


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps, running = 0, 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        episode = make_episode()
        x = torch.stack([s.obs for s in episode.steps])
        y = torch.tensor([s.label for s in episode.steps])
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running = 0.99 * running + 0.01 * loss.item()
        steps += 1
    print(f"{steps} steps, running loss {running:.4f}")


if __name__ == "__main__":
    main()
