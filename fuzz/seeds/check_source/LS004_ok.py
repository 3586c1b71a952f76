from collections import deque

import numpy as np
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(x)


def evaluate(model, loader):
    preds, probs, labels, scores = [], [], [], []
    with torch.no_grad():
        for x, y in loader:
            logits = model(x.to(device))
            preds.append(logits.cpu())
            probs.append(logits.softmax(-1).numpy())
            labels.extend(y.to(device).tolist())
            scores.append(logits.max().item())
    return preds, probs, labels, scores


def per_iteration(model, loader):
    with torch.no_grad():
        for x, _ in loader:
            window = []
            window.append(model(x.to(device)))
            print(torch.stack(window).mean())


def cleared_each_step(model, loader):
    chunks = []
    with torch.no_grad():
        for x, _ in loader:
            chunks.append(model(x.to(device)))
            merged = torch.cat(chunks)
            chunks.clear()
            print(merged.shape)


def graph_values(model, loader):
    # Graph-carrying values are LS002's business.
    outputs = []
    for x, _ in loader:
        outputs.append(model(x.to(device)))
    return outputs


def move_models(models):
    moved = []
    for m in models:
        moved.append(Net().to(device))
    return moved


def host_tensors(loader):
    batches = []
    for x, _ in loader:
        batches.append(x.float())
        batches.append(np.asarray(x))
    return batches


class ReplayBuffer:
    def __init__(self, capacity):
        self.capacity = capacity
        self.states = []
        self.bounded = deque(maxlen=capacity)

    def push(self, obs):
        self.states.append(obs.to(device))
        self.bounded.append(obs.to(device))
        if len(self.states) > self.capacity:
            self.states.pop(0)


class Validator:
    def __init__(self):
        self.model = Net().to(device)
        self.outputs = []

    def validation_step(self, x):
        with torch.no_grad():
            self.outputs.append(self.model(x.to(device)))

    def on_validation_epoch_end(self):
        print(torch.cat(self.outputs).mean())
        self.outputs.clear()


def preallocated(model, loader):
    scores = torch.zeros(len(loader), device=device)
    with torch.no_grad():
        for i, (x, _) in enumerate(loader):
            scores[i] = model(x.to(device)).mean()
    return scores


def episodes(policy, env, n):
    # A per-episode list, stacked after the episode and made afresh for the next one.
    for _ in range(n):
        states = []
        obs = env.reset()
        for t in range(200):
            s = torch.as_tensor(obs, device=device)
            states.append(s)
            obs, done = env.step(policy(s).argmax().item())
            if done:
                break
        print(torch.stack(states).mean())


class RingBuffer:
    def __init__(self, capacity):
        self.items = []
        self.capacity = capacity
        self.position = 0

    def append(self, item):
        if len(self.items) < self.capacity:
            self.items.append(None)
        self.items[self.position] = item
        self.position = (self.position + 1) % self.capacity


class DQNAgent:
    def __init__(self):
        self.memory = RingBuffer(10000)

    def remember(self, obs):
        self.memory.append(torch.tensor(obs, device=device))


def coordinates(x, kernel, dims):
    # A result built over dimensions, not a history of steps: the list is the function's output.
    coords = []
    for d in range(dims):
        coords.append(torch.arange(kernel[d], device=x.device) * x.shape[d])
    return coords


def pinned(inputs):
    for i in range(len(inputs)):
        inputs[i] = inputs[i].pin_memory().cuda(non_blocking=True)
    return inputs
