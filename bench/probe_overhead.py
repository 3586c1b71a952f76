"""What watching a training job costs it: steps/s of a healthy CPU training
loop (examples/zoo/healthy.py) run plain, under `leakspy run` (monitor and
in-process probe at their defaults), under memray, and under tracemalloc.

    .venv/bin/python bench/probe_overhead.py            # writes bench/RESULTS-probe.md
    ROUNDS=7 SECONDS=20 .venv/bin/python bench/probe_overhead.py

Runs are paired: every round runs each variant once, in a rotated order, on
the same machine state; the figure for a variant is the median over rounds of
(plain steps/s) / (variant steps/s) taken within one round, so slow drifts of
the machine cancel out, with a 95 % bootstrap interval of that median. On a
shared machine one run's speed moves by several percent, so resolving 1 %
takes many rounds of one pair:

    ONLY="leakspy run" ROUNDS=24 SECONDS=12 .venv/bin/python bench/probe_overhead.py

The probe's own accounting comes from the `leakspy run` traces: the time its
censuses took (`cost_s`) as a share of the loop's time. At the default 1 %
budget the first census comes about 10 s in, so SECONDS should be above that.
memray is installed into the venv when missing.
"""

import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
PROGRAM = ROOT / "examples/zoo/healthy.py"
ROUNDS = int(os.environ.get("ROUNDS", "5"))
SECONDS = os.environ.get("SECONDS", "15")
OUT = Path(os.environ.get("OUT", ROOT / "bench/RESULTS-probe.md"))
ONLY = os.environ.get("ONLY")


def leakspy_bin():
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "leakspy"], cwd=ROOT, check=True
    )
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "release/leakspy"


def ensure_memray():
    try:
        subprocess.run([PY, "-c", "import memray"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        subprocess.run(
            [PY, "-m", "pip", "install", "--quiet", "memray"], check=True
        )


def steps_per_second(cmd, work):
    env = dict(os.environ, ZOO_SECONDS=SECONDS)
    out = subprocess.run(
        cmd, cwd=work, env=env, capture_output=True, text=True, check=True
    ).stdout
    m = re.search(r"^(\d+) steps", out, re.M)
    if not m:
        raise RuntimeError(f"no step count in output of {cmd}: {out!r}")
    return int(m.group(1)) / float(SECONDS)


def census_cost(trace):
    """(censuses, seconds they took) in a `leakspy run` trace."""
    n, total = 0, 0.0
    with open(trace) as f:
        for line in f:
            if '"census"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut by the run's end
            if rec.get("kind") == "census":
                n += 1
                total += rec.get("cost_s") or 0.0
    return n, total


def median_interval(xs, n=2000):
    """95 % bootstrap interval of the median of xs."""
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def main():
    bin_ = leakspy_bin()
    ensure_memray()
    work = Path(tempfile.mkdtemp(prefix="leakspy-bench-"))
    variants = {
        "plain": [PY, str(PROGRAM)],
        "leakspy run": [str(bin_), "run", "-q", "--trace", str(work / "t.jsonl"), "--", PY, str(PROGRAM)],
        "leakspy run --no-probe": [
            str(bin_), "run", "-q", "--no-probe", "--trace", str(work / "u.jsonl"), "--", PY, str(PROGRAM),
        ],
        "memray run": [PY, "-m", "memray", "run", "-f", "-q", "-o", str(work / "m.bin"), str(PROGRAM)],
        "python -X tracemalloc": [PY, "-X", "tracemalloc=1", str(PROGRAM)],
    }
    if ONLY:
        variants = {n: c for n, c in variants.items() if n in ("plain", ONLY)}
    names = list(variants)
    rates = {n: [] for n in names}
    censuses, census_s = 0, 0.0
    for r in range(ROUNDS):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            rates[n].append(steps_per_second(variants[n], work))
            if n == "leakspy run":
                c, t = census_cost(work / "t.jsonl")
                censuses, census_s = censuses + c, census_s + t
        print(f"round {r + 1}/{ROUNDS}: " + ", ".join(f"{n} {rates[n][-1]:.1f}" for n in names), file=sys.stderr)
    rows = []
    for n in names:
        ratios = [p / v for p, v in zip(rates["plain"], rates[n])]
        lo95, hi95 = median_interval(ratios)
        rows.append((n, statistics.median(rates[n]), statistics.median(ratios), min(ratios), max(ratios),
                     lo95, hi95))
    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except Exception:
        pass
    lines = [
        "# Overhead on a healthy training loop",
        "",
        f"`{Path(PY).name} bench/probe_overhead.py` ({f'ONLY={ONLY!r}, ' if ONLY else ''}ROUNDS={ROUNDS}, SECONDS={SECONDS}): "
        f"examples/zoo/healthy.py (conv net, batch 64, one thread) on {os.cpu_count()} CPUs ({cpu}).",
        "Time ratio = plain steps/s ÷ variant steps/s within one round; median (min–max) over rounds, "
        "and the 95 % bootstrap interval of the median.",
        "",
        "| variant | steps/s (median) | time ratio vs plain | 95 % interval |",
        "| --- | ---: | ---: | ---: |",
    ]
    for n, rate, med, lo, hi, lo95, hi95 in rows:
        lines.append(f"| {n} | {rate:.1f} | {med:.3f}× ({lo:.3f}–{hi:.3f}) | {lo95:.3f}–{hi95:.3f} |")
    if "leakspy run" in names:
        loop_s = ROUNDS * float(SECONDS)
        lines += [
            "",
            f"The probe's own accounting (`leakspy run` at defaults, from its traces): {censuses} censuses "
            f"took {census_s:.2f} s of {loop_s:.0f} s of training loop, {100 * census_s / loop_s:.2f} % of it.",
        ]
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
