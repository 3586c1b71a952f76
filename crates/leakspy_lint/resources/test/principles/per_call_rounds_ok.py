# A local made afresh by each call of an update that runs once per rollout, filled for a count of
# steps written in the source (`PPO_EPOCHS * PPO_BATCHES`): as many graphs as the author chose,
# let go when the call returns.
import torch
import torch.nn as nn

PPO_EPOCHS = 10
PPO_BATCHES = 32


def update(policy: nn.Module, optimizer, batch):
    entropies = []
    for step in range(PPO_EPOCHS * PPO_BATCHES):
        logits = policy(batch)
        entropy = -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1).mean()
        loss = -entropy
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        entropies.append(entropy)
    print(sum(entropies).item() / len(entropies))


def main(policy: nn.Module, rollouts):
    optimizer = torch.optim.Adam(policy.parameters())
    for rollout in rollouts:
        update(policy, optimizer, rollout)
