# The same rollout trained from: the values reach `loss.backward()` through three assignments
# (`values`, `advantage`, `critic_loss`), so the graphs kept are the ones the update needs.
import os

import torch
import torch.nn as nn

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
state = torch.randn(8, 4)
num_steps = int(os.environ.get("NUM_STEPS", "16"))

while True:
    values = []
    rewards = []
    for _ in range(num_steps):
        value = model(state)
        values.append(value)
        rewards.append(torch.randn(8, 2))
    returns = torch.cat(rewards)
    values = torch.cat(values)
    advantage = returns - values
    critic_loss = advantage.pow(2).mean()
    loss = 0.5 * critic_loss
    opt.zero_grad()
    loss.backward()
    opt.step()
