#!/usr/bin/env python3
"""Detection on the zoo: every program of examples/zoo under `leakspy run` (defaults but
--probe-budget, see below), judged against examples/zoo/manifest.json.

    .venv/bin/python bench/zoo_detection.py            # prints a Markdown table

For each program: the verdict, whether the expected holder was named, and for leaks the
steps needed to decide: the trace is cut after each 10 % of its lines (the reader skips the
torn last line, as for a job killed mid-run) and `leakspy report` is asked again; the first
cut whose verdict is "leak" gives the steps done by then. Controls count as false alarms
when their verdict is "leak".

Environment: ZOO_SECONDS (default 20), BUDGET (--probe-budget, default 0.05: a 20-s run at
the 1 % default takes its first census after 10 s), LEAKSPY (binary; default
target/release/leakspy, built if missing).
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECONDS = os.environ.get("ZOO_SECONDS", "20")
BUDGET = os.environ.get("BUDGET", "0.05")


def leakspy_bin():
    if os.environ.get("LEAKSPY"):
        return os.environ["LEAKSPY"]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "leakspy"], cwd=ROOT, check=True)
    return str(target / "release" / "leakspy")


def names(holder, expected):
    if not holder:
        return False
    path = holder.get("path", "")
    return (
        path == expected
        or (holder.get("kind") == "global" and path.endswith("." + expected))
        or (expected == "pyplot" and holder.get("kind") == "pyplot")
    )


def report(binary, trace):
    p = subprocess.run([binary, "report", "--format", "json", str(trace)],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return json.loads(p.stdout) if p.returncode == 0 and p.stdout else None


def steps_to_decide(binary, trace, work):
    lines = trace.read_bytes().splitlines(keepends=True)
    for tenth in range(1, 11):
        cut = work / ("cut%d.jsonl" % tenth)
        cut.write_bytes(b"".join(lines[: max(1, len(lines) * tenth // 10)]))
        r = report(binary, cut)
        if r and r["verdict"] == "leak":
            return r["run"]["steps"], tenth * 10
    return None, None


def main():
    binary = leakspy_bin()
    py = sys.executable
    manifest = json.loads((ROOT / "examples/zoo/manifest.json").read_text())
    rows = []
    for want in manifest:
        prog = want["program"]
        with tempfile.TemporaryDirectory() as d:
            work = Path(d)
            trace, rep = work / "t.jsonl", work / "r.json"
            subprocess.run(
                [binary, "run", "-q", "--probe-budget", BUDGET, "--trace", str(trace),
                 "--report-json", str(rep), "--", py, str(ROOT / "examples/zoo" / prog)],
                env=dict(os.environ, ZOO_SECONDS=SECONDS),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            r = json.loads(rep.read_text())
            groups = r.get("growth") or []
            leak = want["verdict"] == "leak"
            named = leak and any(names(g.get("holder"), want["holder"]) for g in groups)
            decide = steps_to_decide(binary, trace, work) if leak and r["verdict"] == "leak" else (None, None)
            rows.append({
                "program": prog,
                "expected": want["verdict"].replace("_", "-"),
                "verdict": r["verdict"],
                "holder": (want["holder"] if named else "not named") if leak else "-",
                "steps": r["run"]["steps"],
                "decide_steps": decide[0],
                "decide_pct": decide[1],
            })
            print("%s: %s" % (prog, r["verdict"]), file=sys.stderr)
    leaks = [r for r in rows if r["expected"] == "leak"]
    controls = [r for r in rows if r["expected"] != "leak"]
    found = sum(r["verdict"] == "leak" for r in leaks)
    held = sum(r["holder"] not in ("not named", "-") for r in leaks)
    false_alarms = sum(r["verdict"] == "leak" for r in controls)
    out = ["| program | expected | verdict | holder named | steps in run | steps to decide (% of run) |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        decide = "-" if r["decide_steps"] is None else "%d (%d %%)" % (r["decide_steps"], r["decide_pct"])
        out.append("| %s | %s | %s | %s | %d | %s |" % (
            r["program"], r["expected"], r["verdict"], r["holder"], r["steps"], decide))
    out.append("")
    out.append("Leaks found: **%d/%d**, holder named: **%d/%d**, false alarms on controls: **%d/%d** "
               "(ZOO_SECONDS=%s, --probe-budget %s)." % (found, len(leaks), held, len(leaks),
                                                         false_alarms, len(controls), SECONDS, BUDGET))
    print("\n".join(out))


if __name__ == "__main__":
    main()
