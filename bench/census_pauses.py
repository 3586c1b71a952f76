"""How long the job pauses for the probe's censuses, quiet and under a CPU hog.

    .venv/bin/python bench/census_pauses.py        # writes bench/RESULTS-pauses.md

Runs zoo programs under `leakspy run` at its defaults (a healthy loop, a
leak that gets a burst, a cache filled in DataLoader workers), each alone
and then beside two busy loops that take both cores, and reads every census
of the trace: the longest pause of the job for one slice (`pause_s`), the
census's whole wall time (`cost_s`) and CPU time (`cpu_s`), and whether the
holder of a leak was still named. Environment: ZOO_SECONDS (default 40),
LEAKSPY (binary; default target/release/leakspy, built if missing).
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
SECONDS = os.environ.get("ZOO_SECONDS", "40")
PROGRAMS = [("examples/zoo/healthy.py", None), ("examples/zoo/loss_list.py", "Trainer.losses"),
            ("examples/zoo/total_loss.py", "train:total_loss"),
            ("examples/zoo/cat_history.py", "__main__.history"),
            ("examples/zoo/normalizer.py", "RunningNorm.mean"),
            ("examples/growth/worker_cache.py", "SpectrogramDataset.cache")]
HOG = "import time\nt = time.time()\nwhile time.time() - t < 600: pass"


def leakspy():
    exe = os.environ.get("LEAKSPY")
    if exe:
        return exe
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "leakspy"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "release" / "leakspy")


def run(exe, program, hogs):
    procs = [subprocess.Popen([PY, "-c", HOG]) for _ in range(hogs)]
    try:
        with tempfile.TemporaryDirectory() as d:
            trace = Path(d) / "t.jsonl"
            report = Path(d) / "r.json"
            subprocess.run([exe, "run", "--quiet", "--trace", str(trace), "--report-json",
                            str(report), "--", PY, str(ROOT / program)],
                           env=dict(os.environ, ZOO_SECONDS=SECONDS), check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            censuses = []
            pauses = {}
            for line in trace.open():
                if '"kind":"census"' in line:
                    censuses.append(json.loads(line))
                elif '"kind":"cost"' in line:
                    c = json.loads(line)
                    if (c.get("parts") or {}).get("last_look"):
                        continue  # (the look at exit: the job's code has returned)
                    pauses[c.get("pid")] = max(pauses.get(c.get("pid"), 0.0),
                                               c.get("pause_s") or 0.0)
            rep = json.loads(report.read_text())
    finally:
        for p in procs:
            p.kill()
            p.wait()
    holders = [g["holder"]["path"] for g in rep.get("growth", []) if g.get("holder")]
    return censuses, holders, rep["verdict"], max(pauses.values(), default=0.0)


def main():
    exe = leakspy()
    rows = []
    for program, holder in PROGRAMS:
        for hogs in (0, 2):
            cs, holders, verdict, pause = run(exe, program, hogs)
            live = [c for c in cs if c.get("look") is None]
            sliced = [c for c in live if c.get("slices", 1) > 1]
            cpus = [c.get("cpu_s", 0.0) for c in live]
            named = ", ".join(sorted(set(holders))) or "none"
            if holder is not None:
                named = ("yes: " if holder in holders else "no: ") + named
            rows.append((Path(program).name, hogs, verdict, len(live), len(sliced), pause,
                         max(cpus, default=0.0), named))
            print(rows[-1], flush=True)
    out = ["# How long the job pauses for a census", "",
           "`python bench/census_pauses.py` (ZOO_SECONDS=%s, defaults, release build): each "
           "program alone and beside two busy loops that take both cores. A census is done "
           "in slices between steps, and so is its holder search: the longest pause is the "
           "longest the job waited for one slice of either while it ran (the probe's `cost` "
           "messages before its last look at exit), "
           "whole censuses included (one short enough for a slice; one after a search that lost "
           "its objects to a rebinding, `self.total = self.total + loss`, whose head now a look "
           "at the young objects did not find)." % SECONDS, "",
           "| program | hogs | verdict | censuses | in slices | longest pause | longest "
           "census (CPU) | holders named |",
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |"]
    for name, hogs, verdict, n, ns, pause, cpu, named in rows:
        out.append("| %s | %d | %s | %d | %d | %.3f s | %.3f s | %s |"
                   % (name, hogs, verdict, n, ns, pause, cpu, named))
    (ROOT / "bench" / "RESULTS-pauses.md").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
