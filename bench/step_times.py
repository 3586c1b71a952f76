"""The healthy training loop of examples/zoo/healthy.py, timing every step.

Run by bench/probe_excess.py under `leakspy run` (the probe goes in with no
change to this file): writes the wall duration of each training step, in
seconds, one per line, to the file named by STEP_TIMES_OUT.
"""

import os
import sys
import time
from array import array

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "zoo"))
from healthy import ConvNet  # noqa: E402


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seconds = float(os.environ.get("ZOO_SECONDS", "60"))
    images = torch.rand(4096, 1, 28, 28)
    labels = torch.randint(0, 10, (4096,))
    model = ConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    # An array, not a list: the collector does not track it, so the probe
    # does not find the timing itself growing (a list of floats would be a
    # real, if tiny, leak of the measured loop, with its holder search and
    # creation-site lookup charged to the probe).
    times = array("d")
    clock = time.perf_counter
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t0 = clock()
        idx = torch.randint(0, len(images), (64,))
        loss = F.cross_entropy(model(images[idx]), labels[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # the probe's census, when one is due, runs in here
        times.append(clock() - t0)
    with open(os.environ["STEP_TIMES_OUT"], "w") as f:
        f.write("\n".join("%.9f" % t for t in times) + "\n")
    print(f"{len(times)} steps")


if __name__ == "__main__":
    main()
