# The same wrapper keeping the last `n_frames` in a `deque(maxlen=...)` when it wraps one
# environment, and a list of such deques otherwise: whichever it is, each keeps n_frames.
from collections import deque

import numpy as np
import torch.nn as nn


class FrameStack:
    def __init__(self, env, n_frames, single):
        self.env = env
        self.single = single
        if single:
            self.frames = deque([], maxlen=n_frames)
        else:
            self.frames = [deque([], maxlen=n_frames) for _ in range(env.n)]

    def step(self, action):
        obs = self.env.step(action)
        if self.single:
            self.frames.append(obs)
            return np.stack(self.frames)
        for i, o in enumerate(obs):
            self.frames[i].append(o)
        return np.stack([np.stack(f) for f in self.frames])


def train(env, opt, steps):
    model = nn.Linear(4, 2)
    wrapped = FrameStack(env, 4, True)
    obs = wrapped.step(None)
    for _ in range(steps):
        out = model(obs)
        out.mean().backward()
        opt.step()
        obs = wrapped.step(out.detach())
