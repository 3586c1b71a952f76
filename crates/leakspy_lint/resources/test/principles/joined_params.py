# A helper's result made from several of its parameters (`rewards[t] + gamma * R`, R starting as
# `next_value`) carries the graph of whichever argument brings one: here the bootstrap value.
import torch
import torch.nn as nn


def discounted(next_value, rewards, gamma=0.99):
    R = next_value
    returns = []
    for t in reversed(range(len(rewards))):
        R = rewards[t] + gamma * R
        returns.insert(0, R)
    return returns


def main(critic: nn.Module, states):
    opt = torch.optim.Adam(critic.parameters())
    first_returns = []
    for episode in range(5000):
        values = [critic(s) for s in states]
        rewards = [torch.rand(1) for _ in states]
        returns = discounted(critic(states[-1]), rewards)
        first_returns.append(returns[0])  # expect: LS002
        loss = (torch.cat(returns).detach() - torch.cat(values)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
