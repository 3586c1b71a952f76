# The same helper given no graph at all (the bootstrap value computed under `torch.no_grad()`):
# what it returns carries none.
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
        with torch.no_grad():
            last = critic(states[-1])
        returns = discounted(last, rewards)
        first_returns.append(returns[0])
        loss = (torch.cat(returns) - torch.cat(values)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
