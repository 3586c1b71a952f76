import numpy as np


class Simulator:
    def __init__(self, agent, env):
        self.agent = agent
        self.env = env

    def play_episode(self, training=True):
        state = self.env.reset()
        done = False
        total = 0.0
        while not done:
            action = self.agent.act(state)
            next_state, reward, done = self.env.step(action)
            if training:
                self.agent.remember(state, action, reward, next_state, done)
                self.agent.replay()
            state = next_state
            total += reward
        return total

    def train(self, episodes):
        rewards = np.zeros(episodes)
        for n in range(episodes):
            rewards[n] = self.play_episode()
            self.agent.epsilon = max(0.01, self.agent.epsilon * 0.995)
        return rewards
