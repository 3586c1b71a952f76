"""A PPO policy (in the style of RLlib's torch policy, early 2020) computes the value of the last
observation of each rollout fragment to bootstrap the advantages. `_value` runs the model with
autograd on; the value goes into the sample batch that the policy keeps, so every fragment keeps
a graph, and RAM and GPU memory creep up until the trial dies.

Source: ray-project/ray issue #6962, "[RLlib] PPO torch over 5X slower than tensorflow on atari
and uses up all RAM": "adding `with torch.no_grad()` to `def value`" fixed both the RAM leak and
the GPU leak (#7182). Fix: `_value` runs under `torch.no_grad()`.
"""

import numpy as np
import torch
import torch.nn as nn


class PPOTorchPolicy:
    def __init__(self, model, gamma=0.99, lam=0.95):
        self.model = model
        self.gamma = gamma
        self.lam = lam
        self.last_values = []

    def _value(self, obs):
        obs = torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0)
        self.model({"obs": obs})
        return self.model.value_function()[0]

    def postprocess_trajectory(self, sample_batch):
        completed = sample_batch["dones"][-1]
        if completed:
            last_r = 0.0
        else:
            last_r = self._value(sample_batch["new_obs"][-1])
        self.last_values.append(last_r)  # expect: LS002
        return compute_advantages(sample_batch, float(last_r), self.gamma, self.lam)


def compute_advantages(batch, last_r, gamma, lam):
    rewards = np.append(batch["rewards"], last_r)
    vpreds = np.append(batch["vf_preds"], last_r)
    deltas = rewards[:-1] + gamma * vpreds[1:] - vpreds[:-1]
    adv = np.zeros_like(deltas)
    running = 0.0
    for t in reversed(range(len(deltas))):
        running = deltas[t] + gamma * lam * running
        adv[t] = running
    batch["advantages"] = adv
    batch["value_targets"] = adv + batch["vf_preds"]
    return batch


def sample_and_train(workers, policy, optimizer, iterations=10000):
    for it in range(iterations):
        batches = [policy.postprocess_trajectory(w.sample()) for w in workers]
        loss = sum(policy_loss(policy.model, b) for b in batches)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def policy_loss(model, batch):
    obs = torch.as_tensor(batch["obs"], dtype=torch.float32)
    logits = model({"obs": obs})
    values = model.value_function()
    adv = torch.as_tensor(batch["advantages"], dtype=torch.float32)
    targets = torch.as_tensor(batch["value_targets"], dtype=torch.float32)
    logp = torch.log_softmax(logits, -1).gather(1, torch.as_tensor(batch["actions"]).view(-1, 1)).squeeze(1)
    return -(logp * adv).mean() + 0.5 * (values - targets).pow(2).mean()
