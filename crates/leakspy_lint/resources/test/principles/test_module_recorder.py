"""The same recorder where no test framework runs it: a module's forward runs once per step."""
import torch
from torch import nn


class Recorder(nn.Module):
    """Stands in for the attention block and keeps what it was called with."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, hidden_states):
        self.calls.append(hidden_states)  # expect: LS014
        return torch.ones_like(hidden_states)


def build_layer():
    layer = nn.Sequential(nn.Linear(8, 8))
    recorder = Recorder()
    layer.append(recorder)
    return layer, recorder


def test_layer_dispatches_to_the_recorder():
    layer, recorder = build_layer()
    layer(torch.randn(2, 8))
    assert len(recorder.calls) == 1
