import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)
        self.last = None

    def forward(self, x):
        out = self.fc(x)
        self.last = out.clone()  # a module attribute set in forward: LS007's business
        return out


def detached(model, loader, optimizer):
    snapshots = []
    for x, y in loader:
        out = model(x)
        loss = F.mse_loss(out, y)
        loss.backward()
        optimizer.step()
        snapshots.append(out.detach().clone())
        snapshots.append(out.clone().detach())
        snapshots.append(out.detach().cpu())
        snapshots.append(out.cpu().numpy())
        snapshots.append(loss.cpu().item())
    return snapshots


def no_grad_eval(model, loader):
    outputs = []
    with torch.no_grad():
        for x in loader:
            outputs.append(model(x).clone())
            outputs.append(model(x).cpu())
    return outputs


@torch.inference_mode()
def predict(model, loader):
    preds = []
    for x in loader:
        out = model(x)
        preds.append(out.to("cpu"))
    return preds


def data_copies(loader, device):
    # Inputs from the loader carry no graph.
    batches = []
    for x, y in loader:
        batches.append(x.clone())
        batches.append(y.to(device))
    return batches


def parameter_snapshot(model):
    # Parameters are leaves: their clones keep no computation graph worth speaking of.
    best = {}
    for name, p in model.named_parameters():
        best[name] = p.detach().clone()
    return best


def save_state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def per_iteration(model, loader, optimizer):
    for x, y in loader:
        window = []
        out = model(x)
        window.append(out.clone())
        loss = F.mse_loss(window[0], y)
        loss.backward()
        optimizer.step()


def gradient_accumulation(model, loader, optimizer):
    parts = []
    for x, y in loader:
        parts.append(F.mse_loss(model(x), y).clone())
    torch.stack(parts).mean().backward()
    optimizer.step()


def compute(model, x):
    # Not a snapshot helper: returning a copy with its graph is ordinary autograd code.
    out = model(x)
    return out.cpu()


def deep(model):
    best_model = copy.deepcopy(model)
    return best_model


def uses_copy(model, loader, optimizer):
    for x, y in loader:
        out = model(x)
        target = out.clone()  # a local, rebound every step
        loss = F.mse_loss(target, y)
        loss.backward()
        optimizer.step()


class GaussianPolicy:
    def __init__(self):
        self.mu = torch.nn.Linear(4, 2)

    def log_prob(self, x, a, device):
        # Math named like logging: the caller backpropagates through it.
        mu = self.mu(x)
        return (-(a - mu) ** 2).sum(-1).to(device)


def preallocated(model, loader, device):
    outputs = torch.zeros(len(loader), 2, device=device)
    for i, (x, _) in enumerate(loader):
        outputs[i] = model(x).cpu()
    return outputs
