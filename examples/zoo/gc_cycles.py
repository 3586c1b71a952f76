"""Sequence tagging on recorded episodes; each Episode and its Segments point at each other."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Episode:
    def __init__(self, frames, labels, segment_len=8):
        self.frames = frames
        self.labels = labels
        self.segments = [Segment(self, i, i + segment_len) for i in range(0, len(frames), segment_len)]


class Segment:
    def __init__(self, episode, start, stop):
        self.episode = episode  # back-reference: Episode <-> Segment form a cycle
        self.start, self.stop = start, stop
        self.raw = bytes(128 * (stop - start))  # raw 8-bit sensor payload of the segment

    def inputs(self):
        return self.episode.frames[self.start:self.stop]

    def targets(self):
        return self.episode.labels[self.start:self.stop]


def record_episode(length=32, dim=128):
    frames = torch.randn(length, dim)
    labels = (frames[:, 0] > 0).long()
    return Episode(frames, labels)


def next_batch():
    episode = record_episode()
    x = torch.cat([s.inputs() for s in episode.segments])
    y = torch.cat([s.targets() for s in episode.segments])
    return x, y


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps, running = 0, 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        x, y = next_batch()
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running = 0.99 * running + 0.01 * loss.item()
        steps += 1
    print(f"{steps} steps, running loss {running:.4f}")


if __name__ == "__main__":
    main()
