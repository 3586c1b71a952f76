import torch
import torch.nn as nn


class Normalizer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(dim))
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        out = self.fc(x)
        self.running_mean = 0.9 * self.running_mean + 0.1 * out.mean(0).detach()
        return out

    def stats(self):
        return self.running_mean


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.score = nn.Linear(dim, dim)
        self.last_weights = None
        self.calls = 0

    def forward(self, x):
        weights = torch.softmax(self.score(x), dim=-1)
        self.last_weights = weights.detach()
        self.calls = self.calls + 1
        return weights @ x

    def attention_map(self):
        return self.last_weights


class NoGradStats(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.last_norm = None

    def forward(self, x):
        out = self.fc(x)
        with torch.no_grad():
            self.last_norm = out.norm()
        return out

    def norm(self):
        return self.last_norm


class OnlyForward(nn.Module):
    # Read only inside the same forward call: nothing outlives it that forward does not replace.
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        self.tmp = self.fc(x)
        return self.tmp * 2


class TruncatedBPTT(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(16, 32)
        self.h = None

    def reset_state(self, batch):
        self.h = torch.zeros(batch, 32)

    def detach_state(self):
        self.h = self.h.detach()

    def forward(self, x):
        self.h = self.cell(x, self.h)
        return self.h


class Trainer:
    # Not an nn.Module: attributes set in a training step are other rules' business.
    def __init__(self):
        self.model = nn.Linear(4, 4)
        self.last = None

    def forward(self, x):
        self.last = self.model(x)
        return self.last

    def report(self):
        return self.last


class Helper(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)

    def probe(self, x):
        # Not on the forward path: a one-off call, not state kept by every forward.
        self.probe_out = self.fc(x)
        return self.probe_out

    def show(self):
        print(self.probe_out)
