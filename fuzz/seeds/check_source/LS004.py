from collections import deque

import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(x)


def evaluate(model, loader):
    model = model.to(device)
    preds = []
    targets = []
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            preds.append(logits)  # expect: LS004
            targets.append(y)  # expect: LS004
    return torch.cat(preds), torch.cat(targets)


def predict(loader):
    model = Net().to(device)
    embeddings = {}
    outputs = []
    for i, (x, _) in enumerate(loader):
        out = model(x)
        outputs.append(out.detach())  # expect: LS004
        embeddings[i] = out.detach().half()  # expect: LS004
    return outputs, embeddings


def rollout(env, policy, steps):
    observations = []
    for _ in range(steps):
        obs = torch.as_tensor(env.observe(), device="cuda")
        observations += [obs]  # expect: LS004
        env.step(policy(obs).argmax().item())
    return observations


class Agent:
    def __init__(self):
        self.model = Net().to(device)
        self.states = []
        self.recent = deque(maxlen=100)

    def store(self, obs, action):
        self.states.append((obs.to(device), action))  # expect: LS004
        self.recent.append(obs.to(device))
