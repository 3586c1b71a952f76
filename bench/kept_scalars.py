#!/usr/bin/env python3
"""What a loss kept per step costs in resident memory, by how it is kept.

Usage: .venv/bin/python bench/kept_scalars.py [STEPS]

Trains one small model (a shared trunk and two heads, as `examples/zoo/loss_list.py`) and keeps
both losses of every step: with their graphs (the leak LS002 reports), `.detach()`ed, as
`.detach().clone()`s, as `.item()` floats, or not at all. Each way runs in a fresh interpreter,
one after another, and prints the resident memory (RSS) gained per step after a warm-up of
1,000 steps. This is why `check`'s LS002 fix stores `.item()` where every reader of the
container only prints, logs or counts it: a detached 0-d tensor still costs some KiB per step
(its small allocations are made among each step's freed activations and pin the pages around
them), a float 24 bytes.
"""

import os
import subprocess
import sys

WAYS = ("graph", "detach", "clone", "item", "none")

CHILD = r"""
import sys
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
torch.manual_seed(0)
way, steps = sys.argv[1], int(sys.argv[2])
trunk = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64),
                            torch.nn.ReLU())
reg, cls = torch.nn.Linear(64, 1), torch.nn.Linear(64, 4)
params = list(trunk.parameters()) + list(reg.parameters()) + list(cls.parameters())
opt = torch.optim.Adam(params, 1e-3)
x, y, c = torch.randn(8192, 32), torch.randn(8192, 1), torch.randint(0, 4, (8192,))
kept = []


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


for step in range(1000 + steps):
    if step == 1000:
        start = rss()
    i = torch.randint(0, 8192, (64,))
    h = trunk(x[i])
    a, b = F.mse_loss(reg(h), y[i]), F.cross_entropy(cls(h), c[i])
    opt.zero_grad()
    a.backward(retain_graph=True)
    b.backward()
    opt.step()
    if way == "graph":
        kept.append((a, b))
    elif way == "detach":
        kept.append((a.detach(), b.detach()))
    elif way == "clone":
        kept.append((a.detach().clone(), b.detach().clone()))
    elif way == "item":
        kept.append((a.item(), b.item()))
print((rss() - start) / steps)
"""


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    python = os.path.join(root, ".venv", "bin", "python")
    print(f"RSS gained per step over {steps} steps, two losses kept per step:")
    for way in WAYS:
        out = subprocess.run([python, "-c", CHILD, way, str(steps)], capture_output=True,
                             text=True, check=True)
        per_step = float(out.stdout.strip())
        print(f"  {way:<7} {per_step / 1024:8.2f} KiB/step")


if __name__ == "__main__":
    main()
