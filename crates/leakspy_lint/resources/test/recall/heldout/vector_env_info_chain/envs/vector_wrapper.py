"""A vector-env wrapper that auto-resets finished sub-environments and reports their final step
in `infos["final_info"]`. It keeps the last step's info dict, and the new info dict points at the
one before it, so every step's infos (with their tensors on the GPU) stay reachable from the
newest: the chain grows with every step.

Source: mani-skill/ManiSkill pull request #320, "[BugFix] copy info dict to avoid self reference
memory leak in the gymnasium vector env wrapper". Fix: report a copy of the final step's info,
without a reference to the previous dict.
"""

import gymnasium as gym
import torch


class ManiSkillVectorEnv(gym.vector.VectorEnv):
    def __init__(self, env, num_envs, auto_reset=True):
        self._env = env
        self.num_envs = num_envs
        self.auto_reset = auto_reset
        self.last_infos = {}

    def reset(self, *, seed=None, options=None):
        obs, info = self._env.reset(seed=seed, options=options)
        self.last_infos = info
        return obs, info

    def step(self, actions):
        obs, rew, terminations, truncations, infos = self._env.step(actions)
        dones = torch.logical_or(terminations, truncations)
        if self.auto_reset and dones.any():
            final_obs = obs
            obs, _ = self._env.reset(options={"env_idx": torch.nonzero(dones).flatten()})
            infos["final_observation"] = final_obs
            infos["final_info"] = self.last_infos  # expect: LS014|any
            infos["_final_info"] = dones
        self.last_infos = infos
        return obs, rew, terminations, truncations, infos
