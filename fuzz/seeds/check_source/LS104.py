import numpy as np
import torch


class ActionSupervisedAndCritic:
    def __init__(self, teacher, num_envs, num_agents, num_tokens, token_dim):
        self.teacher_policy = teacher
        self.num_envs = num_envs
        self.num_agents = num_agents
        self.obs_shape = (num_envs, num_agents, num_tokens, token_dim)

    def run_rollout(self, env_obs, num_agents):
        env_obs_np = env_obs.cpu().numpy()
        all_teacher_actions = []
        for env_idx in range(self.num_envs):
            obs_for_env = env_obs_np[env_idx].astype(np.uint8, copy=False)
            actions_np = np.zeros(num_agents, dtype=np.int32)  # expect: LS104
            self.teacher_policy.step_batch(obs_for_env, actions_np)
            all_teacher_actions.append(actions_np)
        return np.stack(all_teacher_actions, axis=0)

    def collect(self, envs, steps):
        for step in range(steps):
            obs_buffer = np.empty(self.obs_shape, dtype=np.uint8)  # expect: LS104
            rows = []
            for env in envs:
                rows.append(env.observe())
            batch = np.stack(rows)  # expect: LS104
            mask = torch.zeros(self.num_envs, self.num_agents)  # expect: LS104
            self.teacher_policy.fill(obs_buffer, batch, mask)


def simulate(model, steps, height, width):
    t = 0
    while t < steps:
        frame = np.full((height, width, 3), 255, dtype=np.uint8)  # expect: LS104
        model.render(frame)
        t += 1
