# A recorder that keeps every step's activations, filled by a trainer that never hands it back:
# nobody asked for the history, and it grows for as long as the trainer lives.
import numpy as np
import torch
import torch.nn as nn


class Recorder:
    def __init__(self):
        self.frames = []

    def add(self, frame):
        self.frames.append(frame)  # expect: LS014


class Trainer:
    def __init__(self):
        self.model = nn.Linear(8, 8)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.recorder = Recorder()

    def _step(self, x):
        out = self.model(x)
        loss = out.pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.recorder.add(out.detach().numpy().copy())
        return loss.item()

    def train(self, steps):
        losses = np.zeros(steps)
        for i in range(steps):
            losses[i] = self._step(torch.randn(4, 8))
        return losses
