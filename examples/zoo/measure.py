"""Dev script: run every zoo program under plain python and measure its RSS over time.

    .venv/bin/python examples/zoo/measure.py [--seconds 8] [--jobs 2] [PROGRAM.py ...]

Each program runs with ZOO_SECONDS set, through a small wrapper that imports torch first, counts
optimizer steps with torch's global optimizer step hook and notes when the program's own code
starts (t = 0 below) and when its last step ended (the end of the run). VmRSS is read from
/proc/PID/status every 0.1 s. Per program it prints steps/s, RSS at 1 s and at the end, the
least-squares slope over the last 70 % of the run, the ratio of the slope over the second half of
[1 s, end] to the slope over its first half, the slope after the first 40 % of the run and the
slope of the per-0.5 s-window minima after 40 %, and whether the program meets its target:
leaks 3-40 MiB/s with a half-slope ratio in 0.6-1.6; controls under 0.3 MiB/s after 40 %
(for sawtooth.py, the slope of the window minima).
"""

import argparse
import json
import os
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
stats = {"start": None, "first": None, "last": None, "steps": 0}
def _count(optimizer, args, kwargs):
    now = time.monotonic()
    if stats["first"] is None:
        stats["first"] = now
    stats["last"] = now
    stats["steps"] += 1
torch.optim.Optimizer.register_optimizer_step_post_hook(_count)
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
        samples = []
        captured = {}

        def drain(name, stream):
            captured[name] = stream.read()

        readers = [threading.Thread(target=drain, args=(n, s)) for n, s in
                   (("stdout", proc.stdout), ("stderr", proc.stderr))]
        for r in readers:
            r.start()
        next_tick = time.monotonic()
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
    if not stats or stats["start"] is None or stats["last"] is None:
        return None
    t0, end = stats["start"], stats["last"] - stats["start"]
    pts = [(t - t0, r) for t, r in result["samples"] if t >= t0]
    run = window(pts, 0.0, end)
    if len(run) < 10:
        return None
    at1 = min(run, key=lambda p: abs(p[0] - 1.0))[1]
    mid = (1.0 + end) / 2
    first, second = lsq(window(run, 1.0, mid)), lsq(window(run, mid, end))
    tail = [r for t, r in run if t >= 0.7 * end]
    plateau = sorted(tail)[len(tail) // 2] if tail else float("nan")
    reached = next((t for t, r in run if r >= plateau - 1.0), float("nan"))
    busy = (stats["last"] - stats["first"]) if stats["first"] is not None else 0.0
    return {
        "steps": stats["steps"],
        "steps_per_s": stats["steps"] / busy if busy > 0 else float("nan"),
        "rss_1s": at1,
        "rss_end": run[-1][1],
        "slope70": lsq(window(run, 0.3 * end, end)),
        "ratio": second / first if first else float("nan"),
        "slope_after40": lsq(window(run, 0.4 * end, end)),
        "minima_after40": lsq(window_minima(run, 0.4 * end, end)),
        "plateau_at_s": reached,
        "run_s": end,
    }


def judge(program, verdict, m):
    if m is None:
        return "FAIL (no data)"
    if verdict == "leak":
        ok = 3.0 <= m["slope70"] <= 40.0 and 0.6 <= m["ratio"] <= 1.6
    else:
        key = "minima_after40" if program in SWINGING else "slope_after40"
        ok = m[key] < 0.3
    return "ok" if ok else "FAIL"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--json", help="also write the samples and results here")
    args = parser.parse_args()
    manifest = json.loads((HERE / "manifest.json").read_text())
    verdicts = {e["program"]: e["verdict"] for e in manifest}
    programs = args.programs or [e["program"] for e in manifest]
    programs = [os.path.basename(p) for p in programs]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda p: run_one(p, args.seconds, args.python), programs))
    header = (f"{'program':<18} {'verdict':<8} {'steps/s':>8} {'rss@1s':>8} {'rss_end':>8} "
              f"{'MiB/s70%':>9} {'2nd/1st':>8} {'MiB/s>40%':>10} {'min>40%':>8} {'plateau':>8}  result")
    print(header)
    print("-" * len(header))
    for res in results:
        prog = res["program"]
        verdict = verdicts.get(prog, "?")
        m = analyse(res)
        res["metrics"] = m
        if res["rc"] != 0:
            print(f"{prog:<18} exit {res['rc']}: {res['stderr'].strip().splitlines()[-1:]}")
            continue
        if m is None:
            print(f"{prog:<18} {verdict:<8} no data")
            continue
        print(f"{prog:<18} {verdict:<8} {m['steps_per_s']:>8.0f} {m['rss_1s']:>8.0f} {m['rss_end']:>8.0f} "
              f"{m['slope70']:>9.2f} {m['ratio']:>8.2f} {m['slope_after40']:>10.2f} "
              f"{m['minima_after40']:>8.2f} {m['plateau_at_s']:>7.1f}s  {judge(prog, verdict, m)}")
        if res["stderr"].strip():
            print(f"    stderr: {res['stderr'].strip().splitlines()[-1][:120]}")
    print(f"(RSS in MiB; t = 0 when the program's code starts, after `import torch`; "
          f"ZOO_SECONDS={args.seconds:g}, {args.jobs} at a time)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
