"""What the probe costs: a step hook call, and a census at torch's baseline
and at about a million objects.

    .venv/bin/python python/tests/bench_probe.py [--objects 1000000]

Runs the probe in this process against a listener of its own (it drains the
socket and throws the messages away). Figures are the minimum and the median
of repeated runs; docs/probe.md quotes them.
"""

import argparse
import gc
import os
import socket
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def listener(path):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)

    def drain(c):
        while c.recv(1 << 16):
            pass

    def accept():
        while True:
            c, _ = srv.accept()
            threading.Thread(target=drain, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return srv


def per_call(f, n):
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=1000000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()

    d = tempfile.mkdtemp(prefix="lsp-bench-")
    path = os.path.join(d, "probe.sock")
    srv = listener(path)
    os.environ["LEAKSPY_PROBE_SOCKET"] = path
    os.environ["LEAKSPY_PROBE_BUDGET"] = "0.01"

    t = time.perf_counter()
    import leakspy
    from leakspy import _probe  # what the bootstrap imports

    print("importing the probe: %.1f ms" % ((time.perf_counter() - t) * 1e3))
    noop = [per_call(leakspy.step, 200000) for _ in range(3)]
    _probe.start()
    st = _probe.S
    st.census_on = False  # the hot path alone: count, clock, coalesce
    st.due = float("inf")
    step = [per_call(leakspy.step, 200000) for _ in range(args.rounds)]
    print("leakspy.step() without the probe: %.3f us" % (min(noop) * 1e6))
    print("leakspy.step() with the probe:    %.3f us (median %.3f)"
          % (min(step) * 1e6, statistics.median(step) * 1e6))

    import torch

    from leakspy._census import Census

    def censuses(label, census):
        times = []
        for _ in range(args.rounds):
            with _probe._GcPaused():
                t = time.perf_counter()
                census.run(want_picks=True)
                times.append(time.perf_counter() - t)
        print("census %-30s %8d objects: %6.1f ms (median %.1f)"
              % (label, len(gc.get_objects()), min(times) * 1e3, statistics.median(times) * 1e3))

    _probe._ensure_census(st)
    censuses("after import torch", Census(st.libs))

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    with_hook = [per_call(opt.step, 5000) for _ in range(args.rounds)]
    st.opt_handle.remove()
    without = [per_call(opt.step, 5000) for _ in range(args.rounds)]
    print("optimizer.step() hook: %.2f us (%.1f us with, %.1f us without; min of rounds)"
          % ((min(with_hook) - min(without)) * 1e6, min(with_hook) * 1e6, min(without) * 1e6))

    census = Census(st.libs)
    censuses("after an optimizer step", census)
    extra = args.objects - len(gc.get_objects())
    if extra > 0:
        keep = [(i, [i]) for i in range(extra // 2)]  # tuples and lists: tracked
        censuses("at about %dk objects" % (args.objects // 1000), census)
        del keep
    srv.close()


if __name__ == "__main__":
    main()
