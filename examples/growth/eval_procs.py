"""A new evaluation process every epoch that is never joined: they pile up.

Each epoch starts a ``multiprocessing.Process`` that evaluates a copy of
the model on its own data and then waits for results nobody collects (its
queue is never read), so it never exits. Each one holds its own evaluation
data (about 24 MiB private).
"""

import multiprocessing as mp
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

EPOCHS = int(os.environ.get("EVAL_EPOCHS", "8"))
STEPS_PER_EPOCH = int(os.environ.get("EVAL_STEPS", "300"))


def evaluate(state, results):
    torch.set_num_threads(1)
    model = nn.Linear(64, 10)
    model.load_state_dict(state)
    data = torch.randn(100_000, 64)  # 24 MiB of this process's own
    with torch.no_grad():
        acc = (model(data).argmax(1) == 0).float().mean().item()
    results.put(acc)
    while True:  # waits for a "stop" that never comes
        time.sleep(0.5)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Linear(64, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    results = mp.Queue()
    workers = []
    for epoch in range(EPOCHS):
        for _ in range(STEPS_PER_EPOCH):
            x = torch.randn(32, 64)
            loss = F.cross_entropy(model(x), torch.randint(0, 10, (32,)))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            time.sleep(0.005)
        p = mp.Process(target=evaluate, args=(model.state_dict(), results), daemon=True)
        p.start()
        workers.append(p)
    print("%d epochs, %d evaluation processes alive" % (EPOCHS, sum(p.is_alive() for p in workers)))


if __name__ == "__main__":
    main()
