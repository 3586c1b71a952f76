#!/usr/bin/env python3
"""Detection on the zoo: every program of examples/zoo under `leakspy run` at its defaults,
judged against examples/zoo/manifest.json.

    .venv/bin/python bench/zoo_detection.py            # prints a Markdown table

For each program: the verdict; for leaks whether the expected holder and the line that made
what it holds were named; when the monitor's live fit first saw the growth (its note in the
trace), and how long after that the holder and the line came (their suspect events); the
probe's share of the job's time. Controls count as false alarms when their verdict is
"leak", and as blamed when the report names any holder.

Environment: ZOO_SECONDS (default 20; the manifest may ask more), LEAKSPY (binary; default
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


def timeline(trace, expected):
    """(live fit saw growth, first suspect naming the holder, first with its line): seconds
    since the start of the run, or None."""
    live = held = line = None
    with open(trace) as f:
        for text in f:
            try:
                m = json.loads(text)
            except ValueError:
                continue
            kind = m.get("kind")
            if kind == "note" and live is None and m.get("message", "").startswith("live fit"):
                live = m["t"]
            elif kind == "suspect" and names(m.get("holder"), expected):
                held = m["t"] if held is None else held
                if m.get("created_at") and line is None:
                    line = m["t"]
    return live, held, line


def main():
    binary = leakspy_bin()
    py = sys.executable
    manifest = json.loads((ROOT / "examples/zoo/manifest.json").read_text())
    rows = []
    for want in manifest:
        prog = want["program"]
        seconds = str(want.get("seconds", SECONDS))
        with tempfile.TemporaryDirectory() as d:
            work = Path(d)
            trace, rep = work / "t.jsonl", work / "r.json"
            subprocess.run(
                [binary, "run", "-q", "--trace", str(trace), "--report-json", str(rep),
                 "--", py, str(ROOT / "examples/zoo" / prog)],
                env=dict(os.environ, ZOO_SECONDS=seconds),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            r = json.loads(rep.read_text())
            groups = r.get("growth") or []
            leak = want["verdict"] == "leak"
            named = [g for g in groups if leak and names(g.get("holder"), want["holder"])]
            live, held, line = timeline(trace, want["holder"]) if leak else (None, None, None)
            cost = (r.get("probe") or {}).get("cost") or {}
            rows.append({
                "program": prog,
                "expected": want["verdict"].replace("_", "-"),
                "verdict": r["verdict"],
                "holder": (want["holder"] if named else "not named") if leak else "-",
                "line": bool(named and named[0].get("created_at")),
                "blamed": [g["holder"]["path"] for g in groups if g.get("holder")],
                "live": live, "held": held, "site": line,
                "share": cost.get("share"),
            })
            print("%s: %s" % (prog, r["verdict"]), file=sys.stderr)
    leaks = [r for r in rows if r["expected"] == "leak"]
    controls = [r for r in rows if r["expected"] != "leak"]
    found = sum(r["verdict"] == "leak" for r in leaks)
    held = sum(r["holder"] not in ("not named", "-") for r in leaks)
    lines = sum(r["line"] for r in leaks)
    false_alarms = sum(r["verdict"] == "leak" for r in controls)
    blamed = sum(bool(r["blamed"]) for r in controls)
    waits = sorted(r["held"] - r["live"] for r in leaks
                   if r["held"] is not None and r["live"] is not None)

    def secs(x):
        return "-" if x is None else "%.1f s" % x

    def after(a, b):
        return "-" if a is None or b is None else "+%.1f s" % (a - b)

    out = ["| program | expected | verdict | holder named | line named | live fit saw growth "
           "| holder named after | line named after | probe's share |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        holder = r["holder"] if r["expected"] == "leak" else (
            "none blamed" if not r["blamed"] else "blamed: " + ", ".join(r["blamed"]))
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["program"], r["expected"], r["verdict"], holder,
            ("yes" if r["line"] else "no") if r["expected"] == "leak" else "-",
            secs(r["live"]), after(r["held"], r["live"]), after(r["site"], r["live"]),
            "-" if r["share"] is None else "%.2f %%" % (100 * r["share"])))
    out.append("")
    med = waits[len(waits) // 2] if waits else None
    out.append("Leaks found: **%d/%d**, holder named: **%d/%d**, line named: **%d/%d**, false "
               "alarms on controls: **%d/%d**, holders blamed in controls: **%d/%d**; first holder "
               "%s after the live fit saw the growth (median; %s to %s) (ZOO_SECONDS=%s, defaults)."
               % (found, len(leaks), held, len(leaks), lines, len(leaks), false_alarms,
                  len(controls), blamed, len(controls), secs(med),
                  secs(waits[0] if waits else None), secs(waits[-1] if waits else None), SECONDS))
    print("\n".join(out))


if __name__ == "__main__":
    main()
