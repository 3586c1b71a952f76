import torch
import torch.nn as nn
import torch.nn.functional as F


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)

    def forward(self, x):
        return self.net(x)


class DDPGAgent:
    def __init__(self):
        self.critic = Critic()
        self.actor = nn.Linear(4, 2)

    def update(self, batch, accumulate=False):
        q = self.critic(batch)
        critic_loss = F.mse_loss(q, batch)
        actor_loss = -self.critic(self.actor(batch)).mean()
        (critic_loss + actor_loss).backward()
        return critic_loss, actor_loss


class ERLTrainer:
    def __init__(self, agents):
        self.population = agents
        self.actor_losses = []
        self.history = {}

    def train_population(self, batches):
        critic_losses = []
        for agent in self.population:
            for step, batch in enumerate(batches):
                critic_loss, actor_loss = agent.update(batch)
                self.actor_losses.append(actor_loss)  # expect: LS002
                critic_losses.append(critic_loss)  # expect: LS002
                self.history[step] = {"q": critic_loss}  # expect: LS002
        return critic_losses


def evaluate(model, loader):
    outputs = []
    for x in loader:
        outputs.append(model(x))  # expect: LS002
    return outputs


def collect(model, loader, log):
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        log[i] = loss  # expect: LS002
        log_list = [loss]


losses = []
model = nn.Linear(3, 3)
for x in range(10):
    out = model(torch.randn(3))
    losses += [out.sum()]  # expect: LS002
