"""A single-file DQN on CartPole that logs the largest Q-value it acts on,
in two versions:

    python dqn_q_log.py leak|healthy [SECONDS]

`leak` appends `q_values.max()` to the module's `stats["max_q"]`: the
acting forward pass runs with autograd on, so each logged value keeps
the Q-network's graph and activations for that observation. `healthy`
logs `q_values.max().item()`. One optimizer step per environment step
once the replay buffer (a bounded deque) holds a batch; a target network
synced every 200 steps. Trains for SECONDS of its own CPU time (default
25; a busy machine stretches the run, it does not cut its work), then
prints how many optimizer steps it made.
"""

import collections
import random
import sys
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

stats = collections.defaultdict(list)


def q_network(obs_dim, n_actions):
    return nn.Sequential(nn.Linear(obs_dim, 128), nn.ReLU(),
                         nn.Linear(128, 128), nn.ReLU(),
                         nn.Linear(128, n_actions))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "leak"
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 25.0
    torch.set_num_threads(1)
    torch.manual_seed(0)
    random.seed(0)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    q = q_network(env.observation_space.shape[0], env.action_space.n)
    target = q_network(env.observation_space.shape[0], env.action_space.n)
    target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    replay = collections.deque(maxlen=10000)
    updates, eps = 0, 1.0
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        q_values = q(torch.as_tensor(obs, dtype=torch.float32))  # FORWARD_LINE
        if mode == "leak":
            stats["max_q"].append(q_values.max())  # LEAK_LINE
        else:
            stats["max_q"].append(q_values.max().item())
            del stats["max_q"][:-1000]
        action = env.action_space.sample() if random.random() < eps else int(q_values.argmax())
        eps = max(0.05, eps * 0.999)
        nxt, reward, terminated, truncated, _ = env.step(action)
        replay.append((obs, action, reward, nxt, terminated))
        obs = nxt
        if terminated or truncated:
            obs, _ = env.reset()
        if len(replay) < 64:
            continue
        batch = random.sample(replay, 64)
        o, a, r, n, d = (np.array(x) for x in zip(*batch))
        o, n = torch.as_tensor(o, dtype=torch.float32), torch.as_tensor(n, dtype=torch.float32)
        with torch.no_grad():
            y = torch.as_tensor(r, dtype=torch.float32) + 0.99 * target(n).max(1).values * (
                1 - torch.as_tensor(d, dtype=torch.float32))
        pred = q(o).gather(1, torch.as_tensor(a).unsqueeze(1)).squeeze(1)
        loss = F.mse_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        updates += 1
        if updates % 200 == 0:
            target.load_state_dict(q.state_dict())
    print("optimizer steps:", updates, flush=True)


if __name__ == "__main__":
    main()
