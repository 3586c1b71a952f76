"""Q-learning on a vectorised random-walk task with an experience replay buffer."""

import os
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class ReplayBuffer:
    def __init__(self):
        self.storage = []

    def add(self, obs, action, reward, q_values):
        self.storage.append((obs, action, reward, q_values))

    def sample(self, n):
        batch = random.sample(self.storage, min(n, len(self.storage)))
        obs, action, reward, q_values = zip(*batch)
        return torch.cat(obs), torch.cat(action), torch.cat(reward), torch.cat(q_values)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    random.seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    n_envs, obs_dim, n_actions = 16, 64, 4
    qnet = nn.Sequential(
        nn.Linear(obs_dim, 128), nn.ReLU(),
        nn.Linear(128, 128), nn.ReLU(),
        nn.Linear(128, n_actions),
    )
    optimizer = torch.optim.Adam(qnet.parameters(), lr=5e-4)
    buffer = ReplayBuffer()
    state = torch.randn(n_envs, obs_dim)
    steps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        q_values = qnet(state)
        action = q_values.argmax(1)
        if random.random() < 0.1:
            action = torch.randint(0, n_actions, (n_envs,))
        reward = -(state[:, :n_actions].gather(1, action[:, None]).squeeze(1) - 0.5).abs()
        buffer.add(state, action, reward, q_values)
        state = 0.9 * state + 0.1 * torch.randn(n_envs, obs_dim)

        obs_b, act_b, rew_b, old_q = buffer.sample(16)
        pred = qnet(obs_b).gather(1, act_b[:, None]).squeeze(1)
        target = rew_b + 0.9 * old_q.max(1).values.detach()
        loss = F.smooth_l1_loss(pred, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
    print(f"{steps} steps, buffer holds {len(buffer.storage)} transition batches")


if __name__ == "__main__":
    main()
