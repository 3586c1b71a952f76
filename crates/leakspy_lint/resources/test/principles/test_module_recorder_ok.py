"""A module of tests: what a helper class of it keeps lives for the test that made it."""
import pytest
import torch
from torch import nn


class Recorder(nn.Module):
    """Stands in for the attention block and keeps what it was called with."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, hidden_states):
        self.calls.append(hidden_states)
        return torch.ones_like(hidden_states)


def build_layer():
    layer = nn.Sequential(nn.Linear(8, 8))
    recorder = Recorder()
    layer.append(recorder)
    return layer, recorder


@pytest.mark.parametrize("batch", [1, 2])
def test_layer_dispatches_to_the_recorder(batch):
    layer, recorder = build_layer()
    layer(torch.randn(batch, 8))
    assert len(recorder.calls) == 1
