"""Fitting a tensor-train decomposition to an image by gradient descent (in the style of
tntorch's `optimize`): the loss of every iteration is kept in `loss_history` to decide when to
stop, as a tensor with its full computational graph; 1,000 iterations froze a 12 GB machine on a
100x100 picture.

Source: rballester/tntorch pull request #19, "Fixed errors on GPU. Removed annoying memory leak."
("There was a dangerous memory leak in loss_history. Every added loss used to be a full
computational graph"). Fix: keep `loss.item()`.
"""

import time

import torch


def tt_full(cores):
    full = cores[0]
    for core in cores[1:]:
        full = torch.tensordot(full, core, dims=([-1], [0]))
    return full.squeeze(0).squeeze(-1)


def optimize(cores, target, tol=1e-4, max_iter=10000, lr=1e-2, verbose=True):
    optimizer = torch.optim.Adam(cores, lr=lr)
    loss_history = []
    start = time.time()
    for it in range(max_iter):
        optimizer.zero_grad()
        loss = torch.norm(tt_full(cores) - target) ** 2 / torch.norm(target) ** 2
        loss.backward()
        optimizer.step()
        loss_history.append(loss.item())
        if len(loss_history) >= 2 and abs(loss_history[-2] - loss_history[-1]) / loss_history[-2] < tol:
            break
        if verbose and it % 100 == 0:
            print(f"iter {it}: loss {loss_history[-1]:.6f} ({time.time() - start:.1f} s)")
    return loss_history


if __name__ == "__main__":
    target = torch.rand(100, 100)
    ranks = [1, 10, 1]
    cores = [torch.randn(ranks[i], 100, ranks[i + 1], requires_grad=True) for i in range(2)]
    optimize(cores, target)
