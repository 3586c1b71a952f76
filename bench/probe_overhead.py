"""What watching a training job costs it: steps/s of a healthy CPU training
loop (examples/zoo/healthy.py) run plain, under `leakspy run` (monitor and
in-process probe at their defaults), under memray, and under tracemalloc; and
whether the probe's own accounting of its work predicts the slowdown.

    .venv/bin/python bench/probe_overhead.py            # writes bench/RESULTS-probe.md
    ROUNDS=7 SECONDS=20 .venv/bin/python bench/probe_overhead.py

Runs are paired: every round runs each variant once, in a rotated order, on
the same machine state; the figure for a variant is the median over rounds of
(plain steps/s) / (variant steps/s) taken within one round, so slow drifts of
the machine cancel out, with a 95 % bootstrap interval of that median. On a
shared machine one run's speed moves by several percent, so wall time alone
cannot resolve 1 %. So the probe measures itself: each `leakspy run` trace
ends with its account of the work it did on the job's thread (`cost`
events). The calibration variants run the probe at budgets where wall time
does resolve its cost (BUDGETS, default 0.05,0.1,0.2) and compare the
slowdown measured with the one its accounting predicts; the ratio of the two
carries the accounting at the default budget over to a predicted time ratio.

    ONLY="leakspy run" ROUNDS=24 SECONDS=12 .venv/bin/python bench/probe_overhead.py
    BUDGETS= ...                                        # no calibration variants

At the default 1 % budget the first census comes about 10 s in, so SECONDS
should be above that. memray is installed into the venv when missing.
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
BUDGETS = [float(b) for b in os.environ.get("BUDGETS", "0.05,0.1,0.2").split(",") if b.strip()]


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


def probe_cost(trace):
    """(censuses, probe seconds) from the last `cost` event of the job's own
    process in a `leakspy run` trace: the probe's own accounting of its work
    on the job's threads (docs/probe.md, "When")."""
    last = None
    with open(trace) as f:
        header = json.loads(f.readline())
        pid = header.get("pid")
        for line in f:
            if '"cost"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut by the run's end
            if rec.get("kind") == "cost" and (pid is None or rec.get("pid") == pid):
                last = rec
    if last is None:
        return 0, 0.0
    return last.get("censuses", 0), last.get("probe_s", 0.0)


def median_interval(xs, n=2000):
    """95 % bootstrap interval of the median of xs."""
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def ratio_interval(pairs, n=2000):
    """Σ measured / Σ predicted over pairs, with a 95 % bootstrap interval."""
    rng = random.Random(1)

    def est(ps):
        pred = sum(p for _, p in ps)
        return sum(m for m, _ in ps) / pred if pred > 0 else float("nan")

    boots = sorted(est(rng.choices(pairs, k=len(pairs))) for _ in range(n))
    return est(pairs), boots[int(0.025 * n)], boots[int(0.975 * n) - 1]


def main():
    bin_ = leakspy_bin()
    ensure_memray()
    work = Path(tempfile.mkdtemp(prefix="leakspy-bench-"))

    def under_leakspy(name, *opts):
        return [str(bin_), "run", "-q", *opts, "--trace", str(work / f"{name}.jsonl"), "--", PY, str(PROGRAM)]

    variants = {
        "plain": [PY, str(PROGRAM)],
        "leakspy run": under_leakspy("t"),
        "leakspy run --no-probe": under_leakspy("u", "--no-probe"),
        "memray run": [PY, "-m", "memray", "run", "-f", "-q", "-o", str(work / "m.bin"), str(PROGRAM)],
        "python -X tracemalloc": [PY, "-X", "tracemalloc=1", str(PROGRAM)],
    }
    traces = {"leakspy run": work / "t.jsonl"}
    # Calibration: budgets large enough for wall time to resolve the probe's
    # cost here, to check that its own accounting predicts the slowdown.
    for b in BUDGETS:
        name = f"leakspy run --probe-budget {b:g}"
        variants[name] = under_leakspy(f"b{b:g}", "--probe-budget", f"{b:g}")
        traces[name] = work / f"b{b:g}.jsonl"
    if ONLY:
        variants = {n: c for n, c in variants.items() if n in ("plain", ONLY)}
    names = list(variants)
    rates = {n: [] for n in names}
    accounts = {n: [] for n in traces if n in names}  # (censuses, probe seconds) per round
    for r in range(ROUNDS):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            rates[n].append(steps_per_second(variants[n], work))
            if n in accounts:
                accounts[n].append(probe_cost(traces[n]))
        print(f"round {r + 1}/{ROUNDS}: " + ", ".join(f"{n} {rates[n][-1]:.1f}" for n in names), file=sys.stderr)
    loop_s = float(SECONDS)
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

    # The probe's own accounting: the slowdown it predicts for the loop is
    # probe_s / (loop seconds - probe_s) (the loop runs for a fixed time).
    def predicted(probe_s):
        return probe_s / (loop_s - probe_s)

    if accounts:
        lines += [
            "",
            "## The probe's own accounting, and whether it predicts the slowdown",
            "",
            "Each `leakspy run` trace ends with the probe's account of its work on the job's thread "
            "(`cost` event: censuses, holder and site searches, step messages, the step hook). "
            "Predicted slowdown = probe seconds ÷ (loop seconds − probe seconds); measured = time ratio − 1 "
            "in the same round.",
            "",
            "| variant | censuses per run | probe work per run | predicted slowdown (median, range) | "
            "measured slowdown (median) | measured ÷ predicted (Σ/Σ, 95 % interval) |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        pooled = []
        for n, acc in accounts.items():
            preds = [predicted(p) for _, p in acc]
            meas = [pl / v - 1 for pl, v in zip(rates["plain"], rates[n])]
            k, klo, khi = ratio_interval(list(zip(meas, preds)))
            if n != "leakspy run":
                pooled += list(zip(meas, preds))
            lines.append(
                f"| {n} | {statistics.median(c for c, _ in acc):g} | {statistics.median(p for _, p in acc):.3f} s "
                f"| {100 * statistics.median(preds):.2f} % ({100 * min(preds):.2f}–{100 * max(preds):.2f}) "
                f"| {100 * statistics.median(meas):+.2f} % | {k:.2f} ({klo:.2f}–{khi:.2f}) |")
        if pooled and "leakspy run" in accounts:
            k, klo, khi = ratio_interval(pooled)
            d = [predicted(p) for _, p in accounts["leakspy run"]]
            share = statistics.median(d)
            lines += [
                "",
                f"Calibration over the budgeted runs (where wall time resolves the cost): measured ÷ predicted "
                f"= **{k:.2f}** (95 % interval {klo:.2f}–{khi:.2f}).",
                f"At defaults the probe accounted for **{100 * share:.2f} %** of the loop (median over rounds, "
                f"range {100 * min(d):.2f}–{100 * max(d):.2f} %); with the calibration, the predicted time ratio "
                f"at defaults is **{1 + k * share:.4f}×** ({1 + klo * share:.4f}–{1 + khi * share:.4f}).",
            ]
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
