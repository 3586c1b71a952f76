# A per-episode recorder made once, before a training loop that fills it on every step and
# never replaces it: it keeps every step of the run.
import numpy as np
import torch


class EpisodeRecorder:
    def __init__(self):
        self.frames = []

    def put(self, frame):
        self.frames.append(np.asarray(frame))  # expect: LS014


def train(agent, env, optimizer, steps):
    recorder = EpisodeRecorder()
    obs = env.reset()
    for _ in range(steps):
        loss = agent.loss(obs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        obs, done = env.step(agent.act(obs))
        recorder.put(obs)
