# `del` of a fresh copy that nothing else holds on the common path frees it: a store on a rare
# branch does not make the `del` useless.
import numpy as np


class Collector:
    def __init__(self):
        self.saved = []

    def run(self, env, steps, save_every):
        obs = env.reset()
        for t in range(steps):
            frame = np.array(env.render(), copy=True)
            if t % save_every == 0:
                self.saved.append(frame)
            obs, reward, done, info = env.step(obs)
            del frame
