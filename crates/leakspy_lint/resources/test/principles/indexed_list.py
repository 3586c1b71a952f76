# A collector made by a factory keeps the episode id of every finished episode in a dict keyed
# by a running count: the dict gains an entry per episode for as long as the collector lives.
import torch


def make_collector(env, policy):
    episode_ids = {}
    current_id = 0

    def collect(ctx):
        nonlocal current_id
        timesteps = env.step(ctx.action)
        for timestep in timesteps:
            if timestep.done:
                episode_ids[current_id] = torch.as_tensor(timestep.env_id)  # expect: LS014
                current_id += 1
        loss = policy(timesteps).mean()
        loss.backward()
        ctx.optimizer.step()

    return collect
