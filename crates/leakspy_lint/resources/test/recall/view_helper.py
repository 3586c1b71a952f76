"""Keeps the first token's embedding of every batch for a later t-SNE plot: the helper returns
a row of the batch, which keeps the whole batch's storage alive."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def first_token(hidden):
    return hidden[:, 0]


def train(encoder, head, loader, optimizer):
    cls_history = []
    token_history = []
    for step, (tokens, labels) in enumerate(loader):
        hidden = encoder(tokens)
        loss = F.cross_entropy(head(hidden[:, 0]), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            cls_history.append(first_token(hidden))  # expect: LS005
            token_history.extend(hidden.detach()[:, 1])  # expect: LS005
    return len(cls_history), len(token_history)
