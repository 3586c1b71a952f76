import torch
import torch.nn as nn
import torch.nn.functional as F


class RunningNormalizer:
    def __init__(self, dim, momentum=0.01):
        self.mean = torch.zeros(dim)
        self.M2 = torch.zeros(dim)
        self.count = 0
        self.momentum = momentum
        self.running_mean = torch.zeros(dim)

    def update(self, model, obs):
        feats = model(obs)
        # The fix from the user's report: statistics from detached batch values.
        batch_mean = feats.mean(0).detach()
        batch_count = feats.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        delta2 = batch_mean - self.mean
        self.M2 += delta * delta2 * batch_count
        self.count += batch_count
        self.count += feats.shape[0]
        self.running_mean.mul_(1 - self.momentum).add_(feats.detach().mean(0), alpha=self.momentum)
        return (feats - self.mean) / (self.M2 / self.count).sqrt()

    @torch.no_grad()
    def update_no_grad(self, model, obs):
        feats = model(obs)
        self.mean = self.mean * 0.99 + feats.mean(0) * 0.01
        self.running_mean.mul_(0.99).add_(feats.mean(0), alpha=0.01)

    def update_block(self, model, obs):
        feats = model(obs)
        with torch.no_grad():
            self.mean = self.mean * 0.99 + feats.mean(0) * 0.01
            self.M2 += feats.var(0)

    def update_items(self, model, obs):
        loss = model(obs).sum()
        self.mean = self.mean * 0.99 + loss.item() * 0.01


class Transformer(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x, block):
        for layer in self.blocks:
            x = x + layer(x)
        x = x * 0.5 + block(x)
        return x


def reinforce(policy, critic, episodes, optimizer):
    baseline = 0.0
    avg_loss = 0.0
    for states, returns, log_probs in episodes:
        values = critic(states)
        baseline = 0.9 * baseline + 0.1 * values.mean().item()
        loss = -(log_probs * (returns - baseline)).mean()
        loss.backward()
        optimizer.step()
        avg_loss = 0.98 * avg_loss + 0.02 * loss.item()
    return avg_loss


def data_statistics(loader):
    mean = torch.zeros(3)
    for batch in loader:
        mean = 0.9 * mean + 0.1 * batch.mean(0)
    return mean


def scale_output(model, x):
    out = model(x)
    out.mul_(2).add_(1)
    return out


def one_shot(model, x):
    mean = torch.zeros(4)
    mean = mean * 0.5 + model(x).mean(0) * 0.5
    return mean


class ObsNormalizer:
    def __init__(self, dim):
        self.mean = torch.zeros(dim)
        self.M2 = torch.zeros(dim)
        self.count = 1e-4

    def update(self, x):
        batch_mean = x.mean(0)
        delta = batch_mean - self.mean
        total = self.count + x.shape[0]
        self.mean = self.mean + delta * x.shape[0] / total
        self.M2 += x.var(0) * x.shape[0] + delta**2 * self.count * x.shape[0] / total
        self.count = total


def collect(policy_net, env, obs_norm, steps):
    obs = env.reset()
    for _ in range(steps):
        obs_norm.update(obs)
        action = policy_net(obs)
        obs_norm.update(action.detach())
        obs = env.step(action.detach())
