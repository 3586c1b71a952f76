"""REINFORCE on a small grid-sensor navigation task written with numpy."""

import os
import time

import numpy as np
import torch
import torch.nn as nn


class Env:
    """Agent moves on a line towards a goal; it sees a 40x40 noisy sensor image."""

    def __init__(self, horizon=64, seed=0):
        self.horizon = horizon
        self.rng = np.random.default_rng(seed)
        self.episodes = []  # every finished episode, for the end-of-run statistics

    def reset(self):
        self.t = 0
        self.pos = self.rng.uniform(-1.0, 1.0)
        self.goal = self.rng.uniform(-1.0, 1.0)
        self.rewards, self.observations = [], []
        return self._observe()

    def _observe(self):
        image = self.rng.normal(0.0, 0.1, size=(40, 40)).astype(np.float32)
        image[:, int((self.pos + 1) * 19.5)] += 1.0
        image[int((self.goal + 1) * 19.5), :] += 1.0
        return image

    def step(self, action):
        self.pos = float(np.clip(self.pos + (action - 1) * 0.1, -1.0, 1.0))
        reward = -abs(self.pos - self.goal)
        obs = self._observe()
        self.t += 1
        self.rewards.append(reward)
        self.observations.append(obs)
        done = self.t >= self.horizon
        if done:
            self.episodes.append({"rewards": self.rewards, "observations": self.observations})
        return obs, reward, done


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    env = Env()
    policy = nn.Sequential(nn.Flatten(0), nn.Linear(1600, 64), nn.Tanh(), nn.Linear(64, 3))
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    updates = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        obs, done = env.reset(), False
        log_probs, rewards = [], []
        while not done:
            dist = torch.distributions.Categorical(logits=policy(torch.from_numpy(obs)))
            action = dist.sample()
            obs, reward, done = env.step(int(action))
            log_probs.append(dist.log_prob(action))
            rewards.append(reward)
        returns = torch.tensor(np.cumsum(rewards[::-1])[::-1].copy(), dtype=torch.float32)
        returns = (returns - returns.mean()) / (returns.std() + 1e-6)
        loss = -(torch.stack(log_probs) * returns).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        updates += 1
    mean_return = np.mean([sum(e["rewards"]) for e in env.episodes[-20:]])
    print(f"{updates} steps, mean return {mean_return:.2f} over {len(env.episodes)} episodes")


if __name__ == "__main__":
    main()
