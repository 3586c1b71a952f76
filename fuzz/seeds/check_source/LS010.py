import torch
import torch.nn as nn


class Shocks:
    def __init__(self, max_len=64):
        self.max_len = max_len
        self.ability_history = torch.zeros(0, 8)

    def update_ability_history(self, policy, state, ability):
        ability_tp1 = ability + 0.1 * policy(state)
        self.ability_history = torch.cat(  # expect: LS010
            [self.ability_history, ability_tp1.unsqueeze(0)], dim=0
        )[-self.max_len:]
        return ability_tp1.detach()


def rollout(policy, state, steps, max_len=32):
    history = torch.zeros(0, 8)
    ability = torch.zeros(8)
    for step in range(steps):
        ability_tp1 = ability + policy(state)
        history = torch.cat([history, ability_tp1.unsqueeze(0)])[-max_len:]  # expect: LS010
        ability = ability_tp1.detach()
    return history


def sliding_window(encoder, frames):
    window = encoder(frames[0]).unsqueeze(0)
    for frame in frames[1:]:
        window = torch.cat((window[1:], encoder(frame).unsqueeze(0)), dim=0)  # expect: LS010
    return window


def memory_bank(model, loader):
    bank = model(next(iter(loader)))
    for x in loader:
        noise = torch.randn(1, 16)
        bank = torch.vstack([bank, noise])  # expect: LS010
    return bank
