# The same recorder, renewed by the loop that fills it whenever an episode ends (`if done:`),
# starting from one made before the loop for each environment: each recorder keeps one
# episode, and the replay memory that stores it bounds how many it keeps.
import numpy as np
import torch


class EpisodeRecorder:
    def __init__(self):
        self.frames = []

    def put(self, frame):
        self.frames.append(np.asarray(frame))


def train(agent, envs, optimizer, steps):
    recorders = [EpisodeRecorder() for _ in envs]
    obs = [env.reset() for env in envs]
    for _ in range(steps):
        loss = agent.loss(obs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for i, env in enumerate(envs):
            obs[i], done = env.step(agent.act(obs[i]))
            recorders[i].put(obs[i])
            if done:
                agent.memory.store(recorders[i])
                recorders[i] = EpisodeRecorder()
