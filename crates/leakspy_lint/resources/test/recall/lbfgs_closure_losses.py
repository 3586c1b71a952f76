"""Training a neural Lyapunov function with L-BFGS: the closure records every loss it computes
for the convergence plot. L-BFGS calls the closure many times per step, and each recorded loss is
a tensor with its graph.

Source: StanfordASL/neural-network-lyapunov pull request #140, "Fix the memory leak when calling
line search sd for training Lyapunov": "closure should return only loss, and losses list only
stores the float value, not the tensor". Fix: record `loss.item()`.
"""

import torch
import torch.nn as nn


class LyapunovNet(nn.Module):
    def __init__(self, x_dim, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(x_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden),
                                 nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x) - self.net(torch.zeros_like(x[:1]))


def lyapunov_loss(V, dynamics, x, margin=0.01):
    v = V(x).squeeze(-1)
    v_next = V(dynamics(x)).squeeze(-1)
    positivity = torch.relu(margin * x.norm(dim=1) - v).mean()
    derivative = torch.relu(v_next - v + margin * x.norm(dim=1)).mean()
    return positivity + derivative


def train_lyapunov(dynamics, x_samples, iterations=500):
    V = LyapunovNet(x_samples.shape[1])
    optimizer = torch.optim.LBFGS(V.parameters(), lr=0.5, max_iter=20, line_search_fn="strong_wolfe")
    losses = []

    def closure():
        optimizer.zero_grad()
        loss = lyapunov_loss(V, dynamics, x_samples)
        loss.backward()
        losses.append(loss)  # expect: LS002
        return loss

    for it in range(iterations):
        optimizer.step(closure)
        if it % 50 == 0:
            print(f"iteration {it}: loss {losses[-1].item():.5f}")
    return V, losses
