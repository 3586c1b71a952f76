"""Writes a synthetic leakspy trace (format v1) to stdout: a training job of
one main process and N DataLoader workers sampled at HZ for HOURS, with a
slow leak in the main process, a sawtooth of temporaries, steps at STEPS_HZ,
and PSS every 5 s, as `leakspy run` would write it.

    python3 bench/gen_trace.py --hours 24 --hz 10 --workers 2 --steps-hz 5 > day.jsonl
"""

import argparse
import json
import sys

MIB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps-hz", type=float, default=5.0)
    ap.add_argument("--leak-mib-per-hour", type=float, default=100.0)
    a = ap.parse_args()

    out = sys.stdout
    header = {
        "kind": "header", "format": "leakspy-trace", "version": 1, "leakspy_version": "0.1.0",
        "t": 0.0, "started_at": 1.7e9, "command": ["python", "train.py"], "cwd": "/bench",
        "hostname": "bench", "pid": 1000, "sample_interval_s": 1.0 / a.hz,
    }
    out.write(json.dumps(header, separators=(",", ":")) + "\n")
    n = int(a.hours * 3600 * a.hz)
    dt = 1.0 / a.hz
    step_every = a.hz / a.steps_hz if a.steps_hz > 0 else 0
    step = 0
    next_step_at = 0.0
    leak_per_s = a.leak_mib_per_hour * MIB / 3600
    lines = []
    for i in range(n):
        t = i * dt
        # A deterministic pseudo-jitter of the sample times, as the monitor's.
        t += ((i * 2654435761) % 1000) / 1000.0 * 0.2 * dt
        saw = ((i % 7) * 40 * MIB) // 7
        main_rss = 2000 * MIB + int(leak_per_s * t) + saw
        pss_due = i % int(5 * a.hz) == 0
        procs = []
        total = [0, 0, 0]
        for w in range(a.workers + 1):
            rss = main_rss if w == 0 else 600 * MIB + (i % 3) * MIB
            anon = rss * 9 // 10
            pss = f"{rss * 8 // 10}" if pss_due else "null"
            uss = f"{rss * 7 // 10}" if pss_due else "null"
            pid = 1000 + w
            ppid = 999 if w == 0 else 1000
            name = "python" if w == 0 else "pt_data_worker"
            procs.append(
                f'{{"pid":{pid},"ppid":{ppid},"name":"{name}","rss":{rss},"anon":{anon},'
                f'"swap":0,"pss":{pss},"uss":{uss}}}'
            )
            total[0] += rss
            total[1] += anon
        tp = "null" if not pss_due else str(total[0] * 8 // 10)
        tu = "null" if not pss_due else str(total[0] * 7 // 10)
        lines.append(
            f'{{"kind":"sample","t":{t:.6f},"procs":[{",".join(procs)}],'
            f'"total":{{"rss":{total[0]},"anon":{total[1]},"swap":0,"pss":{tp},"uss":{tu}}},'
            f'"mem_available":{64 * 1024 * MIB - total[0]},'
            f'"cgroup":{{"limit":null,"usage":{total[0] + 50 * MIB},"oom_kill":0}}}}\n'
        )
        while step_every and t >= next_step_at:
            lines.append(f'{{"kind":"step","t":{t:.6f},"step":{step},"source":"optimizer","pid":1000}}\n')
            step += 1
            next_step_at += 1.0 / a.steps_hz
        if len(lines) >= 10000:
            out.write("".join(lines))
            lines.clear()
    t_end = n * dt
    lines.append(f'{{"kind":"exit","t":{t_end:.6f},"code":0,"signal":null,"status":0,"oom_killed":false}}\n')
    out.write("".join(lines))


if __name__ == "__main__":
    main()
