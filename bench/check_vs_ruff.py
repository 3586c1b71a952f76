#!/usr/bin/env python3
"""`leakspy check` against `ruff check --select B,F,PLW` on the same corpus, paired runs.

Usage: bench/check_vs_ruff.py [--rounds N] [CORPUS]

CORPUS defaults to the Python sources of the torch package in the project's venv
(scripts/venv.sh). Each round runs both tools back to back, in alternating order, so drift of
the machine's load hits both alike; the ratio reported is the median of per-round ratios.
Peak memory is each process's maximum resident set size (getrusage of the child).
Neither tool uses a cache: both run with --no-cache (leakspy keeps project summaries between
runs otherwise, which would let its later rounds read what the first one wrote).
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        sys.exit(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far; measured per process below.
    return wall, after.ru_maxrss


def peak_rss_kib(cmd):
    """Peak RSS of one run, with GNU time, which reports per process."""
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    return int(out.stderr.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    venv_py = os.path.join(ROOT, ".venv", "bin", "python")
    corpus = args.corpus or subprocess.check_output(
        [venv_py, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"], text=True).strip()
    leakspy = os.path.join(ROOT, "target", "release", "leakspy")
    if not os.path.exists(leakspy):
        subprocess.check_call(["cargo", "build", "--release", "-q", "-p", "leakspy"], cwd=ROOT)
    ruff = shutil.which("ruff", path=os.path.join(ROOT, ".venv", "bin")) or shutil.which("ruff")
    files = lines = 0
    for d, _, fs in os.walk(corpus):
        for f in fs:
            if f.endswith(".py"):
                files += 1
                with open(os.path.join(d, f), "rb") as fh:
                    lines += fh.read().count(b"\n")
    cmds = {
        "leakspy": [leakspy, "check", "--no-cache", corpus, "--exit-zero", "--quiet"],
        "ruff": [ruff, "check", "--no-cache", "--isolated", "--select", "B,F,PLW", "--exit-zero", "--quiet", corpus],
    }
    for c in cmds.values():  # warm the page cache
        run(c)
    walls = {k: [] for k in cmds}
    ratios = []
    for i in range(args.rounds):
        order = list(cmds) if i % 2 == 0 else list(reversed(list(cmds)))
        got = {}
        for name in order:
            got[name] = run(cmds[name])[0]
            walls[name].append(got[name])
        ratios.append(got["leakspy"] / got["ruff"])
    mem = {k: peak_rss_kib(c) for k, c in cmds.items()}
    ruff_version = subprocess.check_output([ruff, "--version"], text=True).strip()
    print(f"corpus: {corpus} ({files} files, {lines / 1e6:.2f} M lines); {os.cpu_count()} CPUs; {ruff_version}")
    print(f"{'tool':<10}{'median wall':>14}{'min wall':>12}{'peak RSS':>12}")
    for k in cmds:
        print(f"{k:<10}{statistics.median(walls[k]):>13.3f}s{min(walls[k]):>11.3f}s{mem[k] / 1024:>10.1f}MB")
    print(f"wall-time ratio leakspy/ruff: median {statistics.median(ratios):.2f} "
          f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})")
    print(f"peak-memory ratio leakspy/ruff: {mem['leakspy'] / mem['ruff']:.2f}")


if __name__ == "__main__":
    main()
