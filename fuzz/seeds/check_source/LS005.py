import numpy as np
import torch
import torch.nn as nn


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(64, 32000)

    def forward(self, h):
        return self.head(h)


def collect_last_logits(model, loader):
    last_logits = []
    first_tokens = {}
    with torch.no_grad():
        for step, batch in enumerate(loader):
            logits = model(batch)
            last_logits.append(logits[:, -1])  # expect: LS005
            first_tokens[step] = logits[:, 0].T  # expect: LS005
    return last_logits, first_tokens


def record_frames(env, steps):
    frames = []
    for _ in range(steps):
        frame = np.asarray(env.render())
        frames.append(frame[::4, ::4])  # expect: LS005
        env.step(env.action_space.sample())
    return frames


def per_sample(model, loader):
    samples = []
    with torch.no_grad():
        for batch in loader:
            emb = model(batch)
            for row in emb:
                samples.append(row)  # expect: LS005
    return samples


class Recorder:
    def __init__(self):
        self.model = LM()
        self.rows = []
        self.heads = []

    def record_step(self, batch):
        with torch.no_grad():
            out = self.model(batch)
        self.rows.extend(out)  # expect: LS005
        self.heads.append(out.narrow(1, 0, 8))  # expect: LS005
        if len(self.rows) > 1000:
            self.rows = self.rows[-1000:]
