"""A test of a test suite runs once with its fixed inputs: its loops are not a job's steps."""
import pytest
import torch


def test_streaming_matches_batch():
    model = torch.nn.Linear(16, 16)
    x = torch.randn(4, 20, 16)
    ys = []
    for step in range(20):
        ys.append(model(x[:, step : step + 1]))
    assert torch.allclose(torch.cat(ys, dim=1), model(x), atol=1e-6)
