import gc

import torch
import torch.nn.functional as F


class ERLTrainer:
    def __init__(self, make_agent, size):
        self.population = [make_agent() for _ in range(size)]
        self.replay = []

    def evolve_population(self, fitness_scores):
        old_population = self.population
        self.population = create_next_generation(old_population, fitness_scores)
        for agent in old_population:
            del agent  # expect: LS103
        del old_population
        gc.collect()

    def run_episode(self, agent, data):
        env = TradingEnvironment(data)
        final_fitness, episode_summary = agent.play(env)
        del env  # expect: LS103
        return final_fitness, episode_summary

    def collect(self, env, policy, steps):
        obs = env.reset()
        for t in range(steps):
            with torch.no_grad():
                action = policy(obs)
            next_obs, reward, done, _ = env.step(action)
            transition = (obs, action, reward, next_obs, done)
            self.replay.append(transition)
            obs = next_obs
            del transition  # expect: LS103

    def log_losses(self, losses):
        for name, value in losses.items():
            print(name, value)
            del name, value  # expect: LS103


def train(model, loader, optimizer):
    history = []
    for x, y in loader:
        out = model(x)
        loss = F.mse_loss(out, y)
        loss.backward()
        optimizer.step()
        record = {"loss": loss.item(), "out": out}
        history.append(record)
        del out, loss, record  # expect: LS103
    return history


def cleanup(models):
    for m in models:
        del m  # expect: LS103


def create_next_generation(population, scores):
    return population


class TradingEnvironment:
    def __init__(self, data):
        self.data = data
