import torch
import torch.nn as nn
import torch.nn.functional as F


class RunningNormalizer:
    """Welford running mean/variance of policy features (the user's normalizer)."""

    def __init__(self, dim, momentum=0.01):
        self.mean = torch.zeros(dim)
        self.M2 = torch.zeros(dim)
        self.count = 0
        self.momentum = momentum
        self.running_mean = torch.zeros(dim)
        self.prototype = torch.zeros(dim)

    def update(self, model, obs):
        feats = model(obs)
        batch_mean = feats.mean(0)
        batch_count = feats.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total  # expect: LS011
        delta2 = batch_mean - self.mean
        self.M2 += delta * delta2 * batch_count  # expect: LS011
        self.count += batch_count
        m = self.momentum
        self.running_mean.mul_(1 - m).add_(batch_mean, alpha=m)  # expect: LS011
        self.prototype = self.prototype * (1 - m) + feats.mean(0) * m  # expect: LS011
        return (feats - self.mean) / (self.M2 / self.count).sqrt()


def reinforce(policy, critic, episodes, optimizer):
    baseline = torch.zeros(())
    smoothed_loss = 0.0
    for states, returns, log_probs in episodes:
        values = critic(states)
        baseline = 0.9 * baseline + 0.1 * values.mean()  # expect: LS011
        loss = -(log_probs * (returns - baseline.detach())).mean()
        loss.backward()
        optimizer.step()
        smoothed_loss = 0.98 * smoothed_loss + 0.02 * loss  # expect: LS011
    return smoothed_loss


ema_reward = torch.zeros(())
value_net = nn.Linear(4, 1)
for step in range(1000):
    v = value_net(torch.randn(32, 4))
    ema_reward.lerp_(v.mean(), 0.05)  # expect: LS011


class FeatureNormalizer:
    """The user's normalizer: statistics of features computed from policy outputs."""

    def __init__(self, dim):
        self.mean = torch.zeros(dim)
        self.M2 = torch.zeros(dim)
        self.count = 1e-4

    def _reduce_over_batch(self, x):
        m = x.shape[0]
        mean_b = x.mean(0)
        M2_b = ((x - mean_b) ** 2).sum(0)
        return m, mean_b, M2_b

    def update(self, x):
        m, mean_b, M2_b = self._reduce_over_batch(x)
        delta = mean_b - self.mean
        total = self.count + m
        self.mean = self.mean + delta * m / total  # expect: LS011
        self.M2 += M2_b + delta**2 * self.count * m / total  # expect: LS011
        self.count = total

    def normalize(self, x):
        return (x - self.mean) / (self.M2 / self.count).sqrt()


def simulate(policy_net, states, normalizer, optimizer):
    for state in states:
        consumption = policy_net(state)
        normalizer.update(consumption)
        loss = -normalizer.normalize(consumption).mean()
        loss.backward()
        optimizer.step()
