import torch
import torch.nn as nn
import torch.nn.functional as F


def train(model, loader, optimizer):
    total_loss = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss  # expect: LS001
    return total_loss


def evaluate(net, loader):
    running = 0.0
    for x, y in loader:
        out = net(x)
        running = running + out.sum()  # expect: LS001
    return running


class Trainer:
    def __init__(self, model):
        self.model = model
        self.criterion = nn.CrossEntropyLoss()
        self.epoch_loss = 0.0
        self.per_class = {}

    def training_step(self, batch):
        x, y = batch
        loss = self.criterion(self.model(x), y)
        loss.backward()
        self.epoch_loss += loss  # expect: LS001
        return loss


stats = {"loss": 0.0}


def fit(policy, episodes):
    for ep in episodes:
        logp = policy(ep.obs)
        pg_loss = -(logp * ep.adv).mean()
        pg_loss.backward()
        stats["loss"] += pg_loss  # expect: LS001
