import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.score = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.last_weights = None

    def forward(self, x):
        weights = torch.softmax(self.score(x), dim=-1)
        self.last_weights = weights  # expect: LS007
        return weights @ self.value(x)

    def attention_map(self):
        return self.last_weights


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(784, 40)
        self.decoder = nn.Linear(20, 784)

    def encode(self, x):
        h = self.encoder(x)
        mu, logvar = h.chunk(2, dim=-1)
        self.kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())  # expect: LS007
        return mu, logvar

    def forward(self, x):
        mu, logvar = self.encode(x)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.decoder(z)

    def kl_loss(self):
        return self.kl


class StatefulRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(16, 32)
        self.head = nn.Linear(32, 4)
        self.h = torch.zeros(1, 32)

    def forward(self, x):
        self.h = self.cell(x, self.h)  # expect: LS007
        return self.head(self.h)


class FeatureNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        self.features, self.logits = self.backbone(x), None  # expect: LS007
        return self.fc(self.features)

    def embedding(self):
        return self.features.mean(0)
