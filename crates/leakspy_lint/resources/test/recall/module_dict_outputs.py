"""A detection-style model returns a dict of losses and a tuple of (logits, aux); the trainer
keeps the loss entry and the logits of every step for its epoch report, each with its graph."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(64, 32)
        self.cls = nn.Linear(32, 10)

    def forward(self, x, y):
        h = torch.relu(self.backbone(x))
        logits = self.cls(h)
        return {"loss": F.cross_entropy(logits, y), "logits": logits}


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 5)

    def forward(self, x):
        logits = self.fc(x)
        return logits, logits.softmax(-1)


def train(loader, epochs):
    detector = Detector()
    tagger = Tagger()
    optimizer = torch.optim.AdamW(list(detector.parameters()) + list(tagger.parameters()))
    for epoch in range(epochs):
        epoch_losses = []
        epoch_logits = []
        for x, y, tags in loader:
            out = detector(x, y)
            logits, probs = tagger(x)
            loss = out["loss"] + F.cross_entropy(logits, tags)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_losses.append(out["loss"])  # expect: LS002
            epoch_logits.append(logits)  # expect: LS002
        print(epoch, sum(l.item() for l in epoch_losses) / len(epoch_losses), len(epoch_logits))
