# An actor-critic script whose rollout keeps each step's value with its graph, then only logs
# what it computed from them: nothing backpropagates through the values.
import os

import torch
import torch.nn as nn

model = nn.Linear(4, 2)
state = torch.randn(8, 4)
num_steps = int(os.environ.get("NUM_STEPS", "16"))

while True:
    values = []
    rewards = []
    for _ in range(num_steps):  # expect: LS009
        value = model(state)
        values.append(value)
        rewards.append(torch.randn(8, 2))
    returns = torch.cat(rewards)
    values = torch.cat(values)
    advantage = returns - values
    critic_loss = advantage.pow(2).mean()
    print(critic_loss.item())
