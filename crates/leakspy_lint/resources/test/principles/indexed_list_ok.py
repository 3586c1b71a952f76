# The same collector keeps the current episode id of each environment in a list made once:
# `c[k] = v` on a list overwrites an entry, it never adds one.
import torch


def make_collector(env, policy):
    episode_of_env = [torch.zeros(()) for _ in range(env.env_num)]
    current_id = 0

    def collect(ctx):
        nonlocal current_id
        timesteps = env.step(ctx.action)
        for timestep in timesteps:
            if timestep.done:
                episode_of_env[timestep.env_id.item()] = torch.as_tensor(current_id)
                current_id += 1
        loss = policy(timesteps).mean()
        loss.backward()
        ctx.optimizer.step()

    return collect
