"""A small evolutionary RL trainer with the leaks of real training reports.

It runs on CPU in seconds (`python examples/leaky_train.py --generations 3`) and its memory
grows every generation. `leakspy check examples/leaky_train.py` points at each leak:

- loss tensors kept with their autograd graph in a list (ERL trainer, 175 GB by generation 7);
- a running total of losses (`total += loss`);
- an ability history grown with `torch.cat` that links every step to the last;
- normalizer statistics updated from graph-carrying inputs;
- an environment that keeps every episode's rewards and actions;
- deep-copied agents kept every generation;
- matplotlib figures never closed;
- and the cargo cult around them: `gc.collect()` and `torch.cuda.empty_cache()` every step.
"""

import argparse
import copy
import gc

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Normalizer:
    """Running mean/variance of observations (Welford)."""

    def __init__(self, dim):
        self.count = 0
        self.mean = torch.zeros(dim)
        self.M2 = torch.zeros(dim)

    def update(self, x):
        batch_mean = x.mean(0)
        delta = batch_mean - self.mean
        self.count += x.shape[0]
        self.mean = self.mean + delta * x.shape[0] / self.count
        self.M2 = self.M2 + delta * (batch_mean - self.mean) * x.shape[0]

    def __call__(self, x):
        return (x - self.mean) / (self.M2 / max(self.count, 1)).sqrt().clamp(min=1e-6)


class Actor(nn.Module):
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 64), nn.ReLU(), nn.Linear(64, act_dim))

    def forward(self, obs):
        return torch.tanh(self.net(obs))


class Critic(nn.Module):
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + act_dim, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, obs, act):
        return self.net(torch.cat([obs, act], dim=-1))


class TradingEnv:
    def __init__(self, obs_dim):
        self.obs_dim = obs_dim
        self.episode_rewards = []
        self.episode_actions = []

    def reset(self):
        return torch.randn(self.obs_dim)

    def step(self, action):
        reward = float(action.sum())
        self.episode_rewards.append(reward)
        self.episode_actions.append(action.tolist())
        return torch.randn(self.obs_dim), reward


class DDPGAgent:
    def __init__(self, obs_dim, act_dim):
        self.actor = Actor(obs_dim, act_dim)
        self.critic = Critic(obs_dim, act_dim)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=1e-3)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=1e-3)
        self.normalizer = Normalizer(obs_dim)

    def act(self, obs):
        with torch.no_grad():
            return self.actor(obs)

    def update(self, obs, ability):
        self.normalizer.update(ability)
        obs = self.normalizer(obs).detach()
        act = self.actor(obs)
        target = torch.randn(obs.shape[0], 1)
        critic_loss = F.mse_loss(self.critic(obs, act.detach()), target)
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        actor_loss = -self.critic(obs, self.actor(obs)).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
        return critic_loss, actor_loss


class ERLTrainer:
    def __init__(self, population, obs_dim, act_dim):
        self.population = [DDPGAgent(obs_dim, act_dim) for _ in range(population)]
        self.obs_dim = obs_dim
        self.env = TradingEnv(obs_dim)
        self.actor_losses = []
        self.critic_losses = []
        self.hall_of_fame = []
        self.total_loss = 0

    def train_population(self, steps, batch):
        ability = torch.zeros(1, self.obs_dim)
        for agent in self.population:
            for step in range(steps):
                obs = torch.randn(batch, self.obs_dim)
                new_ability = agent.actor(obs).mean(0, keepdim=True).repeat(1, 2)
                ability = torch.cat([ability, new_ability], dim=0)[-64:]
                critic_loss, actor_loss = agent.update(obs, ability)
                self.actor_losses.append(actor_loss)
                self.critic_losses.append(critic_loss)
                self.total_loss += critic_loss
            gc.collect()
            torch.cuda.empty_cache()

    def evaluate(self, episode_len):
        scores = []
        for agent in self.population:
            obs = self.env.reset()
            score = 0.0
            for _ in range(episode_len):
                obs, reward = self.env.step(agent.act(obs))
                score += reward
            scores.append(score)
        return scores

    def evolve(self, scores):
        best = max(range(len(scores)), key=scores.__getitem__)
        self.hall_of_fame.append(copy.deepcopy(self.population[best].actor))

    def plot(self, generation, scores):
        fig, ax = plt.subplots()
        ax.plot(scores)
        ax.set_title(f"generation {generation}")
        fig.savefig(f"/tmp/leaky_train_gen{generation}.png")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop after the generation that passes this many seconds of "
                             "training (at least two generations): a demo as long on a busy "
                             "machine as on an idle one")
    args = parser.parse_args()
    torch.manual_seed(0)
    obs_dim, act_dim = 32, 16
    trainer = ERLTrainer(args.population, obs_dim, act_dim)
    import time  # here, not at the top: the README quotes this file's line numbers

    started = time.monotonic()
    for generation in range(args.generations):
        if (args.seconds is not None and generation >= 2
                and time.monotonic() - started >= args.seconds):
            break
        trainer.train_population(args.steps, batch=256)
        scores = trainer.evaluate(episode_len=200)
        trainer.evolve(scores)
        trainer.plot(generation, scores)
        print(f"generation {generation}: best score {max(scores):.2f}", flush=True)


if __name__ == "__main__":
    main()
