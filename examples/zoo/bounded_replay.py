"""DQN on a vectorised toy task with a bounded replay buffer of detached, packed transitions."""

import collections
import os
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class ReplayBuffer:
    """Keeps the last `capacity` batches of transitions, packed as obs|action|reward|next_obs."""

    def __init__(self, capacity):
        self.memory = collections.deque(maxlen=capacity)

    def push(self, obs, action, reward, next_obs):
        row = torch.cat([obs, action[:, None].float(), reward[:, None], next_obs], 1)
        self.memory.append(row.detach())

    def sample(self, n):
        return torch.cat(random.sample(self.memory, min(n, len(self.memory))))


def q_network(obs_dim, n_actions):
    return nn.Sequential(
        nn.Linear(obs_dim, 256), nn.ReLU(),
        nn.Linear(256, 256), nn.ReLU(),
        nn.Linear(256, n_actions),
    )


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    random.seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    n_envs, obs_dim, n_actions = 256, 64, 6
    qnet, target_net = q_network(obs_dim, n_actions), q_network(obs_dim, n_actions)
    target_net.load_state_dict(qnet.state_dict())
    optimizer = torch.optim.Adam(qnet.parameters(), lr=1e-3)
    buffer = ReplayBuffer(capacity=200)
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

        batch = buffer.sample(1)
        o, a = batch[:, :obs_dim], batch[:, obs_dim].long()
        r, o2 = batch[:, obs_dim + 1], batch[:, obs_dim + 2:]
        with torch.no_grad():
            target = r + 0.99 * target_net(o2).max(1).values
        q = qnet(o).gather(1, a[:, None]).squeeze(1)
        loss = F.mse_loss(q, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
        if steps % 200 == 0:
            target_net.load_state_dict(qnet.state_dict())
    print(f"{steps} steps, buffer {len(buffer.memory)}/{buffer.memory.maxlen}")


if __name__ == "__main__":
    main()
