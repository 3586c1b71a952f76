# An object made as a local of the function that steps it for a whole run (`for step in
# range(steps)`) keeps every step's entries for that run.
import numpy as np


class TradingEnv:
    def __init__(self, prices):
        self.prices = prices
        self.t = 0
        self.actions = []

    def step(self, action):
        self.actions.append(np.array(action))  # expect: LS014
        self.t += 1
        return self.prices[self.t]


def run(agent, prices, steps):
    env = TradingEnv(prices)
    obs = prices[0]
    for step in range(steps):
        obs = env.step(agent.act(obs))
