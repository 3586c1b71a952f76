"""GRU sentiment-style classifier on synthetic token sequences; reports the run's mean loss."""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class TextClassifier(nn.Module):
    def __init__(self, vocab=1000, dim=32, hidden=128, classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, hidden, batch_first=True)
        self.out = nn.Linear(hidden, classes)

    def forward(self, tokens):
        _, h = self.rnn(self.embed(tokens))
        return self.out(h[-1])


def make_corpus(n=20000, length=10, vocab=1000, classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (n, length), generator=g)
    labels = (tokens[:, :3].sum(1) * classes // (3 * vocab)).clamp(max=classes - 1)
    return tokens, labels


def batches(tokens, labels, batch_size):
    while True:
        order = torch.randperm(len(tokens))
        for i in range(0, len(order) - batch_size + 1, batch_size):
            idx = order[i:i + batch_size]
            yield tokens[idx], labels[idx]


def train(model, data, seconds):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    total_loss = 0.0
    steps = 0
    deadline = time.monotonic() + seconds
    for tokens, labels in data:
        if time.monotonic() >= deadline:
            break
        loss = F.cross_entropy(model(tokens), labels)
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        optimizer.step()
        total_loss += loss
        steps += 1
    return total_loss / max(steps, 1), steps


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "8"))
    tokens, labels = make_corpus()
    model = TextClassifier()
    mean_loss, steps = train(model, batches(tokens, labels, 64), seconds)
    print(f"{steps} steps, mean loss {mean_loss.item():.4f}")


if __name__ == "__main__":
    main()
