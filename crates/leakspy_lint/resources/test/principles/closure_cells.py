# A recorder made once by a factory: the list in its closure cell lives as long as the recorder,
# and every step adds to it.
import torch
import torch.nn as nn


def make_recorder():
    norms = []

    def record(model):
        for p in model.parameters():
            norms.append(p.grad.norm().cpu().numpy())  # expect: LS014
        return len(norms)

    return record


def train(model, batches, opt):
    record = make_recorder()
    for x, y in batches:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        record(model)
        opt.step()


train(nn.Linear(4, 1), [(torch.randn(8, 4), torch.randn(8, 1))] * 1000, None)
