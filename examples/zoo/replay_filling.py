"""DQN on a vectorised numpy task whose replay buffer, a deque(maxlen=300_000)
of per-environment transitions, takes far longer than the run to fill."""

import collections
import os
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class ReplayBuffer:
    """Uniform FIFO experience replay of (obs, action, reward, next_obs, done)."""

    def __init__(self, capacity):
        self.memory = collections.deque(maxlen=capacity)

    def push(self, obs, action, reward, next_obs, done):
        self.memory.append((obs, action, reward, next_obs, done))

    def sample(self, n):
        batch = random.sample(self.memory, n)
        obs, act, rew, nxt, done = zip(*batch)
        return (torch.from_numpy(np.stack(obs)), torch.tensor(act),
                torch.tensor(rew, dtype=torch.float32), torch.from_numpy(np.stack(nxt)),
                torch.tensor(done, dtype=torch.float32))


class VecEnv:
    """Random linear dynamics; reward for the action a hidden projection prefers."""

    def __init__(self, n, obs_dim, n_actions, seed=0):
        self.rng = np.random.default_rng(seed)
        self.A = (self.rng.standard_normal((obs_dim, obs_dim)) / np.sqrt(obs_dim)).astype(np.float32)
        self.W = self.rng.standard_normal((obs_dim, n_actions)).astype(np.float32)
        self.s = self.rng.standard_normal((n, obs_dim)).astype(np.float32)

    def step(self, actions):
        reward = (actions == (self.s @ self.W).argmax(1)).astype(np.float32)
        noise = 0.3 * self.rng.standard_normal(self.s.shape).astype(np.float32)
        self.s = np.tanh(self.s @ self.A + noise)
        return self.s, reward, np.zeros(len(actions), dtype=bool)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    random.seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    n_envs, obs_dim, n_actions = 16, 128, 4
    env = VecEnv(n_envs, obs_dim, n_actions)
    qnet = nn.Sequential(nn.Linear(obs_dim, 128), nn.ReLU(), nn.Linear(128, n_actions))
    target_net = nn.Sequential(nn.Linear(obs_dim, 128), nn.ReLU(), nn.Linear(128, n_actions))
    target_net.load_state_dict(qnet.state_dict())
    optimizer = torch.optim.Adam(qnet.parameters(), lr=1e-3)
    buffer = ReplayBuffer(capacity=300_000)
    obs = env.s.copy()
    steps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with torch.no_grad():
            actions = qnet(torch.from_numpy(obs)).argmax(1).numpy()
        next_obs, reward, done = env.step(actions)
        for i in range(n_envs):
            buffer.push(obs[i].copy(), int(actions[i]), float(reward[i]), next_obs[i].copy(),
                        bool(done[i]))
        obs = next_obs.copy()

        if len(buffer.memory) < 64:
            continue
        o, a, r, o2, d = buffer.sample(64)
        with torch.no_grad():
            target = r + 0.9 * (1.0 - d) * target_net(o2).max(1).values
        q = qnet(o).gather(1, a[:, None]).squeeze(1)
        loss = F.smooth_l1_loss(q, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
        if steps % 250 == 0:
            target_net.load_state_dict(qnet.state_dict())
    print(f"{steps} steps, buffer {len(buffer.memory)}/{buffer.memory.maxlen}")


if __name__ == "__main__":
    main()
