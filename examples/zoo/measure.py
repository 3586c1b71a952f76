"""Dev script (not a test): run the zoo programs under plain python and measure their RSS.

    .venv/bin/python examples/zoo/measure.py [--seconds 8] [--jobs 2] [--repeat 1] [PROGRAM.py ...]

Each program runs with ZOO_SECONDS set, through a small wrapper that imports torch, counts
optimizer steps with torch's global optimizer step post-hook and then runs the program with
runpy. VmRSS is read from /proc/PID/status every 0.1 s. Times are measured from the program's
first optimizer step (t = 0) to its last one (the end of the run), so the import of torch and the
set-up before training (big_load.py's data set, for one) are not part of the run.

Columns:
  steps/s     optimizer steps per second over the run
  rss@1s      RSS (MiB) at t = 1 s;  rss_end: RSS at the last step
  MiB/s70%    least-squares slope of RSS over the last 70 % of the run
  2nd/1st     slope over the second half of [1 s, end] divided by the slope over its first half
  MiB/s>40%   least-squares slope after the first 40 % of the run
  min>40%     slope of the minima of 0.5 s windows after the first 40 % of the run
  plateau     first time RSS reaches (median RSS of the last 30 % of the run) - 1 MiB
  KiB/step    RSS growth per optimizer step over the first / second half of [1 s, end]
              (unlike the slopes, not moved by CPU contention from other processes)
  result      leaks: 3 <= MiB/s70% <= 40 and 0.6 <= 2nd/1st <= 1.6;
              controls: MiB/s>40% < 0.3 (sawtooth.py: min>40% < 0.3)

With --repeat N every program runs N times and the table shows the median of each column
(result is judged on the medians; `k/N` says how many single runs passed).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
MIB = 1024 * 1024
SWINGING = {"sawtooth.py"}  # judged by the minima of each window

WRAPPER = r"""
import atexit, json, os, runpy, sys, time
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
stats = {"start": None, "first": None, "last": None, "steps": 0, "marks": []}
def _count(optimizer, args, kwargs):
    now = time.monotonic()
    if stats["first"] is None:
        stats["first"] = now
    stats["last"] = now
    stats["steps"] += 1
    if not stats["marks"] or now - stats["marks"][-1][0] >= 0.1:
        stats["marks"].append((now, stats["steps"]))
register_optimizer_step_post_hook(_count)
def _dump():
    with open(os.environ["ZOO_MEASURE_OUT"], "w") as f:
        json.dump(stats, f)
atexit.register(_dump)
prog = sys.argv[1]
sys.argv = [prog]
sys.path.insert(0, os.path.dirname(os.path.abspath(prog)))
stats["start"] = time.monotonic()
runpy.run_path(prog, run_name="__main__")
"""

COLUMNS = ["steps_per_s", "rss_1s", "rss_end", "slope70", "ratio", "slope_after40",
           "minima_after40", "plateau_at_s", "kib_step_1", "kib_step_2"]


def read_rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def run_one(program, seconds, python):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "stats.json")
        env = dict(os.environ, ZOO_SECONDS=str(seconds), ZOO_MEASURE_OUT=out)
        proc = subprocess.Popen(
            [python, "-c", WRAPPER, str(HERE / program)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        captured = {}

        def drain(name, stream):
            captured[name] = stream.read()

        readers = [threading.Thread(target=drain, args=(n, s))
                   for n, s in (("stdout", proc.stdout), ("stderr", proc.stderr))]
        for r in readers:
            r.start()
        samples, next_tick = [], time.monotonic()
        while proc.poll() is None:
            rss = read_rss(proc.pid)
            if rss is not None:
                samples.append((time.monotonic(), rss / MIB))
            next_tick += 0.1
            time.sleep(max(0.0, next_tick - time.monotonic()))
        for r in readers:
            r.join()
        stats = json.load(open(out)) if os.path.exists(out) else None
    return {"program": program, "rc": proc.returncode, "samples": samples, "stats": stats,
            "stdout": captured.get("stdout", ""), "stderr": captured.get("stderr", "")}


def lsq(points):
    n = len(points)
    if n < 3:
        return float("nan")
    mt = sum(t for t, _ in points) / n
    mr = sum(r for _, r in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (r - mr) for t, r in points) / var if var else float("nan")


def window(points, lo, hi):
    return [(t, r) for t, r in points if lo <= t <= hi]


def window_minima(points, lo, hi, width=0.5):
    out, t = [], lo
    while t + width <= hi + 1e-9:
        w = window(points, t, t + width)
        if w:
            out.append((t + width / 2, min(r for _, r in w)))
        t += width
    return out


def analyse(result):
    stats = result["stats"]
    if result["rc"] != 0 or not stats or stats["first"] is None or stats["last"] is None:
        return None
    t0, end = stats["first"], stats["last"] - stats["first"]
    run = window([(t - t0, r) for t, r in result["samples"]], 0.0, end)
    if len(run) < 10:
        return None

    def rss_at(t):
        return min(run, key=lambda p: abs(p[0] - t))[1]

    marks = [(t - t0, n) for t, n in stats["marks"]]

    def steps_at(t):
        return max((n for m, n in marks if m <= t), default=0)

    mid = (1.0 + end) / 2
    first, second = lsq(window(run, 1.0, mid)), lsq(window(run, mid, end))
    per_step = []
    for lo, hi in ((1.0, mid), (mid, end)):
        dn = steps_at(hi) - steps_at(lo)
        per_step.append((rss_at(hi) - rss_at(lo)) * 1024 / dn if dn else float("nan"))
    tail = sorted(r for t, r in run if t >= 0.7 * end)
    plateau = tail[len(tail) // 2]
    return {
        "steps_per_s": stats["steps"] / end if end > 0 else float("nan"),
        "rss_1s": rss_at(1.0),
        "rss_end": run[-1][1],
        "slope70": lsq(window(run, 0.3 * end, end)),
        "ratio": second / first if first else float("nan"),
        "slope_after40": lsq(window(run, 0.4 * end, end)),
        "minima_after40": lsq(window_minima(run, 0.4 * end, end)),
        "plateau_at_s": next((t for t, r in run if r >= plateau - 1.0), float("nan")),
        "kib_step_1": per_step[0],
        "kib_step_2": per_step[1],
    }


def passes(program, verdict, m):
    if m is None:
        return False
    if verdict == "leak":
        return 3.0 <= m["slope70"] <= 40.0 and 0.6 <= m["ratio"] <= 1.6
    key = "minima_after40" if program in SWINGING else "slope_after40"
    return m[key] < 0.3


def median_metrics(runs):
    good = [m for m in runs if m is not None]
    if not good:
        return None
    return {k: statistics.median(m[k] for m in good) for k in COLUMNS}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", help="default: every program in manifest.json")
    parser.add_argument("--seconds", type=float, default=8.0, help="ZOO_SECONDS (default 8)")
    parser.add_argument("--jobs", type=int, default=2, help="programs run at a time (default 2)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per program (default 1)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--json", help="also write the samples and results here")
    args = parser.parse_args()
    manifest = json.loads((HERE / "manifest.json").read_text())
    verdicts = {e["program"]: e["verdict"] for e in manifest}
    programs = [os.path.basename(p) for p in args.programs] or [e["program"] for e in manifest]
    todo = [p for _ in range(args.repeat) for p in programs]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda p: run_one(p, args.seconds, args.python), todo))

    header = (f"{'program':<18} {'verdict':<8} {'steps/s':>7} {'rss@1s':>7} {'rss_end':>7} "
              f"{'MiB/s70%':>8} {'2nd/1st':>7} {'MiB/s>40%':>9} {'min>40%':>7} {'plateau':>7} "
              f"{'KiB/step':>13}  result")
    print(header)
    print("-" * len(header))
    for prog in programs:
        verdict = verdicts.get(prog, "?")
        mine = [r for r in results if r["program"] == prog]
        runs = []
        for r in mine:
            r["metrics"] = analyse(r)
            runs.append(r["metrics"])
            if r["rc"] != 0:
                print(f"{prog:<18} exit {r['rc']}: {r['stderr'].strip().splitlines()[-1:]}")
        m = median_metrics(runs)
        if m is None:
            print(f"{prog:<18} {verdict:<8} no data")
            continue
        verdict_ok = "ok" if passes(prog, verdict, m) else "FAIL"
        if args.repeat > 1:
            verdict_ok += f" ({sum(passes(prog, verdict, x) for x in runs)}/{len(runs)})"
        print(f"{prog:<18} {verdict:<8} {m['steps_per_s']:>7.0f} {m['rss_1s']:>7.0f} "
              f"{m['rss_end']:>7.0f} {m['slope70']:>8.2f} {m['ratio']:>7.2f} "
              f"{m['slope_after40']:>9.2f} {m['minima_after40']:>7.2f} {m['plateau_at_s']:>6.1f}s "
              f"{m['kib_step_1']:>6.1f}/{m['kib_step_2']:<6.1f}  {verdict_ok}")
    print(f"(RSS in MiB, t = 0 at the first optimizer step; ZOO_SECONDS={args.seconds:g}, "
          f"{args.jobs} at a time" + (f", median of {args.repeat} runs)" if args.repeat > 1 else ")"))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
