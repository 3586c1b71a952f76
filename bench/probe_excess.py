"""What the probe's censuses cost a training loop, measured inside the loop.

    .venv/bin/python bench/probe_excess.py              # writes bench/RESULTS-excess.md
    BUDGETS=0.01,0.2 SECONDS=60 .venv/bin/python bench/probe_excess.py

Wall-time ratios of whole runs cannot resolve 1 % on a shared machine (one
run's speed moves by several percent from the next: bench/probe_overhead.py).
This benchmark compares steps with their neighbours instead: it runs
bench/step_times.py (the loop of examples/zoo/healthy.py, timing each step)
under `leakspy run` (at its defaults for 0.01, else with `--probe-budget B`) and, for every census in the trace (its
`step` says which step it ran in: the optimizer hook runs inside
`optimizer.step()`), takes

    excess = sum over the census step and the AFTER steps that follow it of
             (step time - the mean step time of the steps around them)

The neighbours (WINDOW steps on each side, other censuses left out) run on
the same machine a second earlier or later, so the machine's own drift
cancels. The excess is what the census cost the loop, including what it
does after it returns (caches it evicted, a heap it grew); it is compared
with the census's own measured time (`cost_s`) and the probe's accounting
(`cost` events). The steady costs that touch every step alike (the step hook,
one message per 0.1 s) are invisible to a comparison with neighbours; they
are counted by the probe (1 us per step, and the messages' measured time).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
PROGRAM = ROOT / "bench/step_times.py"
BUDGETS = [float(b) for b in os.environ.get("BUDGETS", "0.01,0.2").split(",") if b.strip()]
SECONDS = os.environ.get("SECONDS", "60")
AFTER = int(os.environ.get("AFTER", "30"))
WINDOW = int(os.environ.get("WINDOW", "150"))
OUT = Path(os.environ.get("OUT", ROOT / "bench/RESULTS-excess.md"))
DEFAULT_BUDGET = 0.01  # leakspy's own default: run with no option


def leakspy_bin():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "leakspy"], cwd=ROOT, check=True)
    return Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release/leakspy"


def read_trace(path):
    """(census steps with their cost_s, the last cost event) of the job's own process."""
    censuses, cost = [], None
    with open(path) as f:
        pid = json.loads(f.readline()).get("pid")
        for line in f:
            if '"census"' not in line and '"cost"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("pid") != pid:
                continue
            if rec.get("kind") == "census" and rec.get("step"):
                censuses.append((int(rec["step"]), float(rec.get("cost_s") or 0.0)))
            elif rec.get("kind") == "cost":
                cost = rec
    return censuses, cost


def excess_of(times, censuses):
    """Per census: (excess in its own step, excess in the AFTER steps after it)."""
    hit = set()
    for step, _ in censuses:
        hit.update(range(step - 1, step + AFTER))
    out = []
    for step, _ in censuses:
        i = step - 1
        if i < WINDOW or i + AFTER + WINDOW > len(times):
            continue  # too close to either end to have neighbours on both sides
        around = [times[j] for j in list(range(i - WINDOW, i)) + list(range(i + AFTER, i + AFTER + WINDOW))
                  if j not in hit]
        if len(around) < WINDOW:
            continue
        base = statistics.fmean(around)
        own = times[i] - base
        after = sum(times[j] - base for j in range(i + 1, i + AFTER))
        out.append((step, own, after))
    return out


def main():
    bin_ = leakspy_bin()
    work = Path(tempfile.mkdtemp(prefix="leakspy-excess-"))
    lines = [
        "# What the probe's censuses cost a training loop, measured inside it",
        "",
        f"`{Path(PY).name} bench/probe_excess.py` (BUDGETS={','.join(f'{b:g}' for b in BUDGETS)}, SECONDS={SECONDS}, "
        f"AFTER={AFTER}, WINDOW={WINDOW}): bench/step_times.py (the loop of examples/zoo/healthy.py) under "
        f"`leakspy run` (at its defaults for 0.01, else with `--probe-budget B`), {os.cpu_count()} CPUs. Excess = step time minus the mean of the "
        "neighbouring steps, summed over the census's step and the steps after it.",
        "",
        "| budget | steps | censuses judged | census time (`cost_s`, sum) | excess: census steps | excess: the steps after | "
        "excess ÷ census time | loop slowdown from censuses, measured (excess ÷ rest of the loop) | "
        "probe's own accounting (all its work ÷ rest of the loop) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    bursts = []
    for b in BUDGETS:
        trace, out = work / f"b{b:g}.jsonl", work / f"b{b:g}.txt"
        env = dict(os.environ, ZOO_SECONDS=SECONDS, STEP_TIMES_OUT=str(out))
        # The default budget is run as a user runs it: with no option at all.
        budget_args = [] if b == DEFAULT_BUDGET else ["--probe-budget", f"{b:g}"]
        subprocess.run([str(bin_), "run", "-q", *budget_args, "--trace", str(trace), "--",
                        PY, str(PROGRAM)], env=env, check=True, stdout=subprocess.DEVNULL)
        times = [float(x) for x in out.read_text().split()]
        censuses, cost = read_trace(trace)
        judged = excess_of(times, censuses)
        cost_s = dict(censuses)
        census_time = sum(cost_s[s] for s, _, _ in judged)
        own = sum(o for _, o, _ in judged)
        after = sum(a for _, _, a in judged)
        # The whole loop's census excess, scaled from the censuses judged to all of them.
        all_census_time = sum(c for _, c in censuses)
        loop_excess = (own + after) / census_time * all_census_time if census_time else 0.0
        slowdown = loop_excess / (sum(times) - loop_excess)
        # The probe's accounting over the loop (its work is all in the loop).
        share = cost["probe_s"] / (sum(times) - cost["probe_s"]) if cost else float("nan")
        lines.append(
            f"| {b:g} | {len(times)} | {len(judged)} of {len(censuses)} | {census_time:.3f} s | {own:.3f} s | "
            f"{after:+.3f} s | {(own + after) / census_time if census_time else float('nan'):.2f} | "
            f"{100 * slowdown:.2f} % | {100 * share:.2f} % |")
        bursts.append((b, (cost or {}).get("bursts", 0), (cost or {}).get("burst_s", 0.0)))
        print(f"budget {b:g}: {len(times)} steps, {len(censuses)} censuses", file=sys.stderr)
    lines += [
        "",
        "Bursts (the monitor asks for them when memory grows like a leak; a healthy loop should get none): "
        + "; ".join(f"budget {b:g}: {n} ({s:.2f} s of probe work)" for b, n, s in bursts) + ".",
        "",
        "The probe's accounting times the 30 steps after each census itself and charges what they took beyond the usual step time; it adds "
        "what a comparison with neighbours cannot see: the step hook (1 µs per step) and the step messages.",
        "",
        "Step time in a loop without censuses moves too (the machine is shared): the excess of a single census "
        "scatters by a few milliseconds; the sums above are over every census far enough from the ends.",
    ]
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
