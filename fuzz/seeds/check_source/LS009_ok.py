import torch
import torch.nn as nn
import torch.nn.functional as F


def evaluate_no_grad(model, loader):
    model.eval()
    predictions = []
    with torch.no_grad():
        for x, _ in loader:
            predictions.append(model(x))
    return torch.cat(predictions)


@torch.no_grad()
def evaluate_decorated(model, loader):
    predictions = []
    for x, _ in loader:
        predictions.append(model(x))
    return predictions


@torch.inference_mode()
def predict(model, loader):
    return [model(x) for x in loader]


def inference_block(model, loader):
    outs = []
    with torch.inference_mode():
        for x in loader:
            outs.append(model(x))
    return outs


def set_grad_disabled(model, loader, training=False):
    outs = []
    with torch.set_grad_enabled(training):
        for x in loader:
            outs.append(model(x))
    return outs


def train(model, loader, optimizer, criterion):
    losses = []
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def items_only(model, loader, criterion):
    model.eval()
    total = 0.0
    correct = []
    for x, y in loader:
        out = model(x)
        total += criterion(out, y).item()
        correct.append((out.argmax(-1) == y).sum().item())
        correct.append(out.detach())
    return total, correct


def per_iteration(model, loader):
    for x in loader:
        outs = []
        outs.append(model(x))
        print(len(outs))


def last_only(model, loader):
    out = None
    for x in loader:
        out = model(x)
    return out


def gradient_penalty(critic, real, fake):
    penalties = []
    for alpha in torch.linspace(0, 1, 5):
        mixed = alpha * real + (1 - alpha) * fake
        score = critic(mixed)
        grad = torch.autograd.grad(score.sum(), mixed, create_graph=True)[0]
        penalties.append(grad)
    return torch.stack(penalties).mean()


class LitModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.outputs = []

    def validation_step(self, model, batches):
        for x in batches:
            self.outputs.append(model(x))


def numbers_only(loader):
    totals = []
    for x in loader:
        totals.append(x.sum())
    return totals


def fit(model, train_loader, val_loader, optimizer, criterion, epochs):
    for epoch in range(epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        val_losses = []
        with torch.no_grad():
            for x, y in val_loader:
                val_losses.append(criterion(model(x), y))


def accumulate_then_backward(model, chunks, optimizer):
    outs = []
    for x in chunks:
        outs.append(model(x))
    loss = torch.cat(outs).pow(2).mean()
    loss.backward()
    optimizer.step()


def nested_accumulation(model, loader, optimizer):
    for batch in loader:
        parts = []
        for x in batch:
            parts.append(model(x).sum())
        torch.stack(parts).mean().backward()
        optimizer.step()


def unroll(model, xs):
    outs = []
    for x in xs:
        outs.append(model(x))
    return torch.stack(outs)


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(1, 51)
        self.outputs = []

    def forward(self, model, inputs):
        outputs = []
        for x in inputs:
            outputs += [model(x)]
        return torch.cat(outputs, dim=1)


def rollout_features(encoder, frames):
    feats = []
    for f in frames:
        feats.append(encoder(f))
    return feats


class Agent:
    def __init__(self, policy):
        self.log_probs = []

    def collect_rollout(self, policy, env, steps):
        state = env.reset()
        for _ in range(steps):
            dist = policy(state)
            self.log_probs.append(dist)
            state = env.step(dist)
