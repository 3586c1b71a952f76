import numpy as np
import torch
import torch.nn as nn


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(64, 32000)

    def forward(self, h):
        return self.head(h)


def copies(model, loader):
    kept = []
    with torch.no_grad():
        for batch in loader:
            logits = model(batch)
            kept.append(logits[:, -1].clone())
            kept.append(logits[:, -1].cpu())
            kept.append(logits[:, -1].tolist())
            kept.append(logits[0, 0].item())
            kept.append(logits[:, -1].contiguous())
            kept.append(torch.tensor(logits[0]))
            kept.extend(logits.tolist())
            kept.extend([row.clone() for row in logits])
    return kept


def numpy_copies(env, steps):
    frames = []
    for _ in range(steps):
        frame = np.asarray(env.render())
        frames.append(frame[::4, ::4].copy())
        frames.append(np.array(frame[:, 0]))
        frames.append(frame[0])
    return frames


def long_lived_base(data, n):
    # Views of a base that lives anyway keep nothing extra alive.
    rows = []
    for i in range(n):
        rows.append(data[i])
    return rows


class Buffer:
    def __init__(self, size):
        self.storage = torch.zeros(size, 4)
        self.views = []

    def record_step(self, i):
        self.views.append(self.storage[i])


def reshapes(model, loader):
    # Reshaping a whole tensor keeps no more than it shows.
    kept = []
    with torch.no_grad():
        for batch in loader:
            out = model(batch)
            kept.append(out.view(-1))
            kept.append(out.T)
    return kept


def advanced_indexing(model, loader, idx):
    kept = []
    with torch.no_grad():
        for batch in loader:
            out = model(batch)
            kept.append(out[idx])
            kept.append(out[[0, 2]])
    return kept


def per_iteration(model, loader):
    with torch.no_grad():
        for batch in loader:
            window = []
            out = model(batch)
            window.append(out[:, -1])
            print(torch.stack(window).sum())


def graph_views(model, loader):
    # A graph-carrying view is LS002's business.
    kept = []
    for batch in loader:
        kept.append(model(batch)[:, -1])
    return kept


def rows_changed(model, loader):
    kept = []
    with torch.no_grad():
        for batch in loader:
            for row in model(batch):
                row = row * 2
                kept.append(row)
    return kept


def preallocated(env, steps):
    frames = np.zeros((steps, 32, 32, 3), dtype=np.uint8)
    for t in range(steps):
        frame = np.asarray(env.render())
        frames[t] = frame[::4, ::4]
    return frames
