from collections import deque

import numpy as np
import torch
import torch.nn as nn


class TradingEnvironment:
    def __init__(self, data_array):
        self.data_array = data_array
        self.t = 0
        self.episode_rewards = []
        self.episode_actions = []

    def step(self, action):
        reward = float(np.dot(self.data_array[self.t], action))
        self.episode_rewards.append(reward)  # expect: LS014
        self.episode_actions.append(action.copy())  # expect: LS014
        self.t += 1
        return self.data_array[self.t], reward

    def get_episode_summary(self):
        return {
            "total_reward": sum(self.episode_rewards),
            "num_trades": len(self.episode_actions),
        }


class DDPGAgent:
    def __init__(self):
        self.actor = nn.Linear(8, 2)
        self.critic = nn.Linear(10, 1)
        self.actor_loss_history = []
        self.critic_loss_history = []
        self.q_values = deque()
        self.per_step = {}

    def update(self, batch, step):
        critic_loss = self.critic(batch).pow(2).mean()
        actor_loss = -self.critic(batch).mean()
        (critic_loss + actor_loss).backward()
        self.actor_loss_history.append(actor_loss.item())  # expect: LS014
        self.critic_loss_history += [critic_loss.item()]  # expect: LS014
        self.q_values.append(float(critic_loss))  # expect: LS014
        self.per_step[step] = actor_loss.item()  # expect: LS014
        self.actor_loss_history.append(0.0)

    def get_stats(self):
        return np.mean(self.actor_loss_history[-1000:])


class Trainer:
    def __init__(self, model):
        self.model = model
        self.step_times = []
        self.grad_norms = []

    def run_episode(self, env, steps):
        obs = env.reset()
        for t in range(steps):
            action = self.model(torch.as_tensor(obs)).detach().numpy()
            obs, reward = env.step(action)
            self.step_times.append(reward)  # expect: LS014

    def training_step(self, batch):
        loss = self.model(batch).mean()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.grad_norms.append(norm.item())  # expect: LS014

    def on_epoch_end(self):
        # One entry per epoch, not per step: still unbounded against many appends.
        if self.grad_norms:
            self.grad_norms.pop(0)
