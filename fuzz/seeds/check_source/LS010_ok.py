import torch
import torch.nn as nn


class Shocks:
    def __init__(self, policy, max_len=64):
        self.policy = policy
        self.max_len = max_len
        self.ability_history = torch.zeros(0, 8)
        self.ability_history = torch.cat([self.ability_history, torch.zeros(1, 8)])

    def update_ability_history(self, state, ability):
        ability_tp1 = ability + 0.1 * self.policy(state)
        # The fix from the user's report: detach the history and the new entry.
        self.ability_history = torch.cat(
            [self.ability_history.detach(), ability_tp1.detach().unsqueeze(0)], dim=0
        )[-self.max_len:]
        return ability_tp1.detach()


def detached_history(policy, state, steps, max_len=32):
    history = torch.zeros(0, 8)
    for step in range(steps):
        out = policy(state)
        history = torch.cat([history.detach(), out.unsqueeze(0)])[-max_len:]
    return history


def detached_inputs(policy, state, steps):
    history = torch.zeros(0, 8)
    for step in range(steps):
        out = policy(state).detach()
        history = torch.cat([history, out.unsqueeze(0)])
    return history


def under_no_grad(policy, state, steps):
    history = torch.zeros(0, 8)
    with torch.no_grad():
        for step in range(steps):
            history = torch.cat([history, policy(state).unsqueeze(0)])
    return history


@torch.inference_mode()
def generate(model, tokens, steps):
    for _ in range(steps):
        logits = model(tokens)
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
    return tokens


def plain_data(loader):
    buf = torch.zeros(0, 3)
    for batch in loader:
        buf = torch.cat([buf, batch])[-1000:]
    return buf


def once(model, x):
    feats = model(x)
    feats = torch.cat([feats, x], dim=1)
    return feats


def concat_other(model, loader):
    out = torch.zeros(0, 4)
    for x in loader:
        y = model(x)
        out = torch.cat([y, y])
    return out


def set_grad_disabled(policy, state, steps):
    history = torch.zeros(0, 8)
    with torch.set_grad_enabled(False):
        for step in range(steps):
            history = torch.cat([history, policy(state)])
    return history


class DenseBlock(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x, extra):
        for layer in self.layers:
            x = torch.cat([x, extra(x)], 1)
        return x


def dense_features(x, layers, head):
    for layer in layers:
        x = torch.cat([x, head(x)], dim=1)
    return x
