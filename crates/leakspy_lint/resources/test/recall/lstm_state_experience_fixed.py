"""A PPO learner with a recurrent policy fills its experience buffer during rollouts; the LSTM
state that goes into the buffer comes straight from the policy's forward with autograd on, so
every stored transition keeps the graph of the rollout step that produced it.

Source: Metta-AI/metta pull request #1139, "Detaching the LSTM state before storing experience"
("computational graphs with LSTM state were persisting into the experience replay buffer").
Fix: store `h.detach()` and `c.detach()`.
"""

import torch
import torch.nn as nn


class RecurrentPolicy(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=128):
        super().__init__()
        self.encoder = nn.Linear(obs_dim, hidden)
        self.lstm = nn.LSTMCell(hidden, hidden)
        self.actor = nn.Linear(hidden, n_actions)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, obs, state):
        h, c = self.lstm(torch.relu(self.encoder(obs)), state)
        return self.actor(h), self.critic(h).squeeze(-1), (h, c)


class Experience:
    def __init__(self, capacity):
        self.capacity = capacity
        self.obs, self.actions, self.logprobs, self.values, self.lstm_h, self.lstm_c = [], [], [], [], [], []

    def store(self, obs, action, logprob, value, h, c):
        self.obs.append(obs)
        self.actions.append(action)
        self.logprobs.append(logprob)
        self.values.append(value)
        self.lstm_h.append(h)
        self.lstm_c.append(c)

    def full(self):
        return len(self.obs) >= self.capacity


def rollout(env, policy, experience, state):
    obs = torch.as_tensor(env.reset(), dtype=torch.float32)
    while not experience.full():
        logits, value, (h, c) = policy(obs, state)
        dist = torch.distributions.Categorical(logits=logits.detach())
        action = dist.sample()
        h, c = h.detach(), c.detach()
        experience.store(obs, action, dist.log_prob(action), value.detach(), h, c)
        state = (h, c)
        obs, reward, done, _ = env.step(action.numpy())
        obs = torch.as_tensor(obs, dtype=torch.float32)
    return state


def train(env, policy, epochs=1000, capacity=2048):
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-4)
    state = (torch.zeros(env.num_agents, 128), torch.zeros(env.num_agents, 128))
    for epoch in range(epochs):
        experience = Experience(capacity)
        state = rollout(env, policy, experience, state)
        h0 = torch.stack(experience.lstm_h)
        logits, values, _ = policy(torch.stack(experience.obs), (h0, torch.stack(experience.lstm_c)))
        loss = (values - torch.stack(experience.values)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
