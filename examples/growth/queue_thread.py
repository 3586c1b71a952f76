"""A background thread posts validation losses to a queue nobody drains.

``AsyncValidator`` runs the model on held-out batches in a thread of its
own and puts each loss on ``self.results``, a ``queue.Queue`` the training
loop was meant to read. Nobody reads it; each loss keeps its autograd
graph (the validation forward was not under ``torch.no_grad()``).
"""

import os
import queue
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SECONDS = float(os.environ.get("ZOO_SECONDS", "25"))


class AsyncValidator:
    def __init__(self, model):
        self.model = model
        self.results = queue.Queue()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="validator", daemon=True)

    def run(self):
        x_val = torch.randn(64, 128)
        y_val = torch.randint(0, 10, (64,))
        while not self.stop.is_set():
            loss = F.cross_entropy(self.model(x_val), y_val)
            self.results.put(loss)
            time.sleep(0.02)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    validator = AsyncValidator(model)
    validator.thread.start()
    steps = 0
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        x = torch.randn(32, 128)
        loss = F.cross_entropy(model(x), torch.randint(0, 10, (32,)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
        time.sleep(0.002)
    validator.stop.set()
    # Joined, not left to die with the interpreter: a daemon thread inside a
    # torch op at exit can abort the process ("terminate called without an
    # active exception").
    validator.thread.join()
    print("%d steps, %d results waiting" % (steps, validator.results.qsize()))


if __name__ == "__main__":
    main()
