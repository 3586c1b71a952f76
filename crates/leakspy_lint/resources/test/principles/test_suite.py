"""The same loop in a script (no test suite imported): it runs once per step of the job."""
import torch


def test_streaming_matches_batch():
    model = torch.nn.Linear(16, 16)
    x = torch.randn(4, 20, 16)
    ys = []
    for step in range(20):  # expect: LS009
        ys.append(model(x[:, step : step + 1]))
    assert torch.allclose(torch.cat(ys, dim=1), model(x), atol=1e-6)
