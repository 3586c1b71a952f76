"""DQN-style training with a bounded replay buffer of detached transitions."""

import collections
import os
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class ReplayBuffer:
    def __init__(self, capacity):
        self.memory = collections.deque(maxlen=capacity)

    def push(self, obs, action, reward, next_obs):
        self.memory.append((obs.detach(), action.detach(), reward.detach(), next_obs.detach()))

    def sample(self, n):
        batch = random.sample(self.memory, min(n, len(self.memory)))
        return [torch.cat(t) for t in zip(*batch)]


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    random.seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    n_envs, obs_dim, n_actions = 32, 128, 6
    qnet = nn.Sequential(nn.Linear(obs_dim, 128), nn.ReLU(), nn.Linear(128, n_actions))
    target_net = nn.Sequential(nn.Linear(obs_dim, 128), nn.ReLU(), nn.Linear(128, n_actions))
    target_net.load_state_dict(qnet.state_dict())
    optimizer = torch.optim.Adam(qnet.parameters(), lr=1e-3)
    buffer = ReplayBuffer(capacity=1500)
    obs = torch.randn(n_envs, obs_dim)
    steps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with torch.no_grad():
            action = qnet(obs).argmax(1)
        next_obs = 0.95 * obs + 0.3 * torch.randn(n_envs, obs_dim)
        reward = next_obs[torch.arange(n_envs), action]
        buffer.push(obs, action, reward, next_obs)
        obs = next_obs

        o, a, r, o2 = buffer.sample(8)
        with torch.no_grad():
            target = r + 0.99 * target_net(o2).max(1).values
        q = qnet(o).gather(1, a[:, None]).squeeze(1)
        loss = F.mse_loss(q, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
        if steps % 500 == 0:
            target_net.load_state_dict(qnet.state_dict())
    print(f"{steps} steps, buffer {len(buffer.memory)}/{buffer.memory.maxlen}")


if __name__ == "__main__":
    main()
