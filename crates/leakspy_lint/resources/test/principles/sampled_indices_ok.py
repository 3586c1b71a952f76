# Indices drawn by `torch.multinomial` (or a tensor's `.multinomial`), counted by `histc` or
# `count_nonzero`, are integers or counts: they carry no graph, whatever they were drawn from.
import torch
import torch.nn as nn


def generate(model, x, steps=200):
    out = []
    for _ in range(steps):
        logits = model(x)
        probs = torch.softmax(logits[0, -1], dim=-1)
        x = torch.multinomial(probs, 1).unsqueeze(0)
        out.append(x)
    return out


def histogram(model, x):
    logits = model(x)
    return torch.histc(logits, bins=10), logits.softmax(-1).multinomial(1), torch.count_nonzero(logits)


def main(model, data):
    opt = torch.optim.Adam(model.parameters())
    kept = []
    hists = []
    for epoch in range(100):
        for batch in data:
            logits = model(batch[:, :-1])
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
        kept.append(generate(model, data[0][:1]))
        hists.append(histogram(model, data[0][:1]))
