import numpy as np
import torch


class Rollout:
    def __init__(self, num_envs, num_agents):
        self.num_envs = num_envs
        self.num_agents = num_agents
        # Preallocated once: the recommended pattern.
        self.actions = np.zeros((num_envs, num_agents), dtype=np.int32)

    def run(self, teacher, obs):
        for env_idx in range(self.num_envs):
            teacher.step_batch(obs[env_idx], self.actions[env_idx])
        return self.actions.reshape(-1)


def train(model, loader, optimizer, device, hidden):
    for x, y in loader:
        # Shape follows the batch: a new shape per iteration.
        mask = np.zeros(x.shape[0], dtype=bool)
        weights = np.ones(len(y))
        # Tiny literal shapes cost nothing.
        counts = np.zeros(3)
        eye = np.zeros((8, 8))
        # On the accelerator the caching allocator reuses the block.
        h0 = torch.zeros(2, x.shape[0], hidden, device=device)
        c0 = torch.zeros(2, 64, hidden, device=device)
        out = model(x, (h0, c0), mask, weights, counts, eye)
        out.sum().backward()
        optimizer.step()


def batches(items, batch_size):
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        yield np.zeros((len(chunk), 4))


def per_epoch(model, epochs, n):
    for epoch in range(epochs):
        confusion = np.zeros((n, n))
        model.evaluate(confusion)


def stack_kept(history, steps):
    rows = []
    for step in range(steps):
        rows.append(history[step])
    # Outside the loop: once.
    return np.stack(rows)


def pad(sequences, max_len):
    for i, seq in enumerate(sequences):
        buf = np.zeros((len(seq), max_len))
        yield buf
