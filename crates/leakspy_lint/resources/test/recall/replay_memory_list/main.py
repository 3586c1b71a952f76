import numpy as np

from agent import QAgent
from simulator import Simulator


class PriceEnv:
    def __init__(self, n_state=40, length=500):
        self.n_state = n_state
        self.length = length

    def reset(self):
        self.t = 0
        self.prices = np.cumsum(np.random.randn(self.length + self.n_state))
        return self.prices[: self.n_state].copy()

    def step(self, action):
        self.t += 1
        window = self.prices[self.t: self.t + self.n_state].copy()
        reward = float((action - 1) * (window[-1] - window[-2]))
        return window, reward, self.t >= self.length


def main():
    env = PriceEnv()
    agent = QAgent(env.n_state, 3)
    sim = Simulator(agent, env)
    sim.train(1000)


if __name__ == "__main__":
    main()
