import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)


def train(model, loader, optimizer, device):
    snapshots = []
    history = {}
    for step, (x, y) in enumerate(loader):
        out = model(x.to(device))
        loss = F.cross_entropy(out, y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        snapshots.append(out.clone())  # expect: LS003
        history[step] = {"logits": out.cpu(), "step": step}  # expect: LS003
        history[f"loss/{step}"] = loss.to("cpu").float()  # expect: LS003
    return snapshots, history


def evaluate(model, loader):
    outputs = []
    for x, _ in loader:
        outputs.append((x, (model(x) * 2).clone()))  # expect: LS003
    return outputs


class Trainer:
    def __init__(self):
        self.model = Net()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.best_logits = None
        self.checkpoints = []

    def training_step(self, x, y):
        logits = self.model(x)
        loss = F.mse_loss(logits, y)
        loss.backward()
        self.optimizer.step()
        self.best_logits = logits.clone()  # expect: LS003
        self.checkpoints.append(logits[:4].cpu())  # expect: LS003
        return loss.item()

    def log_predictions(self, x):
        preds = self.model(x).softmax(-1)
        return preds.cpu()  # expect: LS003


def snapshot_activations(model, x):
    hidden = model(x)
    return {"hidden": hidden.clone(), "shape": tuple(hidden.shape)}  # expect: LS003


class LitModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 2)
        self.last_logits = None

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.last_logits = logits.cpu()  # expect: LS003
        return loss
