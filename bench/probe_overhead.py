"""What watching a training job costs it: steps/s of a healthy CPU training
loop (examples/zoo/healthy.py) run plain, under `leakspy run` (monitor and
in-process probe at their defaults), under memray, and under tracemalloc.

    .venv/bin/python bench/probe_overhead.py            # writes bench/RESULTS-probe.md
    ROUNDS=7 SECONDS=20 .venv/bin/python bench/probe_overhead.py

Runs are paired: every round runs each variant once, in a rotated order, on
the same machine state; the figure for a variant is the median over rounds of
(plain steps/s) / (variant steps/s) taken within one round, so slow drifts of
the machine cancel out. memray is installed into the venv when missing.
"""

import os
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
    names = list(variants)
    rates = {n: [] for n in names}
    for r in range(ROUNDS):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            rates[n].append(steps_per_second(variants[n], work))
        print(f"round {r + 1}/{ROUNDS}: " + ", ".join(f"{n} {rates[n][-1]:.1f}" for n in names), file=sys.stderr)
    rows = []
    for n in names:
        ratios = [p / v for p, v in zip(rates["plain"], rates[n])]
        rows.append((n, statistics.median(rates[n]), statistics.median(ratios), min(ratios), max(ratios)))
    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except Exception:
        pass
    lines = [
        "# Overhead on a healthy training loop",
        "",
        f"`{Path(PY).name} bench/probe_overhead.py` (ROUNDS={ROUNDS}, SECONDS={SECONDS}): "
        f"examples/zoo/healthy.py (conv net, batch 64, one thread) on {os.cpu_count()} CPUs ({cpu}).",
        "Time ratio = plain steps/s ÷ variant steps/s within one round; median (min–max) over rounds.",
        "",
        "| variant | steps/s (median) | time ratio vs plain |",
        "| --- | ---: | ---: |",
    ]
    for n, rate, med, lo, hi in rows:
        lines.append(f"| {n} | {rate:.1f} | {med:.3f}× ({lo:.3f}–{hi:.3f}) |")
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
