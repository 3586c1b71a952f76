import gc

import torch
import torch.nn as nn
import torch.nn.functional as F


def train(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        for step, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            torch.cuda.empty_cache()  # expect: LS101


def train_guarded(model, loader, optimizer):
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # expect: LS101


def rollout(env, policy, num_steps):
    obs = env.reset()
    step = 0
    while step < num_steps:
        with torch.no_grad():
            action = policy(obs)
        obs, reward, done, info = env.step(action)
        torch.cuda.empty_cache()  # expect: LS101
        if done:
            obs = env.reset()
        step += 1


class Agent:
    def __init__(self):
        self.q = nn.Linear(8, 4)
        self.opt = torch.optim.Adam(self.q.parameters())

    def update(self, batch):
        loss = self.q(batch).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        torch.cuda.empty_cache()  # expect: LS101
        return loss.item()


class LitModel:
    def training_step(self, batch, batch_idx):
        loss = self.model(batch).loss
        torch.cuda.empty_cache(); gc.collect()  # expect: LS101
        return loss


num_steps = 10_000
for step in range(num_steps):
    torch.cuda.empty_cache()  # expect: LS101
