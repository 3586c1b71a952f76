# Sampling keeps the graph only where sampling is differentiable: `torch.bernoulli` is.
import torch
import torch.nn as nn


def generate(model, x, steps=200):
    out = []
    for _ in range(steps):
        logits = model(x)
        out.append(torch.bernoulli(torch.sigmoid(logits[:, -1])))
    return out


def main(model, data):
    opt = torch.optim.Adam(model.parameters())
    kept = []
    for epoch in range(100):
        for batch in data:
            logits = model(batch[:, :-1])
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
        kept.append(generate(model, data[0][:1]))  # expect: LS002
