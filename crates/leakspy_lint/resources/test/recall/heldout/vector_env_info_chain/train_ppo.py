"""PPO on a GPU-simulated manipulation task through a gymnasium vector-env wrapper (in the style
of ManiSkill's `ManiSkillVectorEnv`): the training loop only reads the episode statistics out of
each step's `infos`."""

import gymnasium as gym
import torch

from envs.vector_wrapper import ManiSkillVectorEnv


def main(agent, total_steps=10_000_000, num_envs=512, num_steps=50):
    envs = ManiSkillVectorEnv(gym.make("PickCube-v1", num_envs=num_envs), num_envs)
    optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4)
    obs, _ = envs.reset(seed=1)
    global_step = 0
    while global_step < total_steps:
        rollout = []
        for step in range(num_steps):
            with torch.no_grad():
                action, logprob, value = agent.get_action_and_value(obs)
            next_obs, reward, terminations, truncations, infos = envs.step(action)
            rollout.append((obs, action, logprob, value, reward, terminations | truncations))
            obs = next_obs
            global_step += num_envs
            if "final_info" in infos:
                done = infos["_final_info"]
                print(f"step {global_step}: return {infos['final_info']['episode']['r'][done].mean():.2f}")
        loss = agent.ppo_loss(rollout)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
