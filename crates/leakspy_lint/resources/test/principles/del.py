# `del` of a value stored on every path frees nothing: the list still holds it.
import numpy as np


class Collector:
    def __init__(self):
        self.saved = []

    def run(self, env, steps):
        obs = env.reset()
        for t in range(steps):
            frame = np.array(env.render(), copy=True)
            self.saved.append(frame)
            obs, reward, done, info = env.step(obs)
            del frame  # expect: LS103
