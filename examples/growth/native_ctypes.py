"""A native leak: a C buffer per step, allocated through ctypes and never freed.

The training loop hands each batch to a "native decoder" (here libc's
malloc, as an extension's C code would) and forgets to free the buffer.
No Python object grows; the memory does.
"""

import ctypes
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SECONDS = float(os.environ.get("ZOO_SECONDS", "20"))

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.memset.restype = ctypes.c_void_p
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]


def decode(batch):
    n = 64 * 1024
    buf = libc.malloc(n)  # never freed
    libc.memset(buf, 1, n)
    return batch


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        x = decode(torch.randn(32, 64))
        loss = F.cross_entropy(model(x), torch.randint(0, 10, (32,)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
        time.sleep(0.002)
    print("%d steps" % steps)


if __name__ == "__main__":
    main()
