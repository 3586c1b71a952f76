import torch
import torch.nn as nn
import torch.nn.functional as F


def evaluate(model, loader):
    model.eval()
    predictions = []
    for x, _ in loader:  # expect: LS009
        predictions.append(model(x))
    return torch.cat(predictions)


def validate(model, loader, criterion):
    model.eval()
    val_loss = 0.0
    for x, y in loader:  # expect: LS009
        out = model(x)
        val_loss += criterion(out, y)
    return val_loss / len(loader)


class Evaluator:
    def __init__(self):
        self.embeddings = {}

    def embed_dataset(self, encoder, dataset):
        for i, (name, image) in enumerate(dataset):  # expect: LS009
            features = encoder(image)
            self.embeddings[name] = features


def predict_many(model, batches):
    results = []
    for batch in batches:
        for x in batch:  # expect: LS009
            logits = model(x)
            probs = logits.softmax(-1)
            results.append(probs)
            results.append(logits)
    return results


model = nn.Linear(8, 2)
scores = []
for step in range(100):  # expect: LS009
    scores.append(model(torch.randn(4, 8)))


def fit(model, train_loader, val_loader, optimizer, criterion, epochs):
    history = []
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        model.eval()
        val_losses = []
        for x, y in val_loader:  # expect: LS009
            val_losses.append(criterion(model(x), y))
        history.append(sum(val_losses).item())
    return history
