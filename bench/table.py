#!/usr/bin/env python3
"""The benchmark table, one command: runs every benchmark of bench/ side by side with its
anchors, prints one table and writes it (with each part's full output) to bench/RESULTS.md.

    .venv/bin/python bench/table.py          # ~30 min on 2 cores

Parts (each is also a command of its own):
  1. `leakspy check` vs ruff on torch's installed sources      bench/check_vs_ruff.py
     and vs TorchFix on a sample (torch/nn, ~180 files)         (here)
  2. overhead on a healthy CPU training loop                    bench/probe_overhead.py
     and what censuses cost it, measured inside the loop         bench/probe_excess.py
  3. detection on the zoo                                       bench/zoo_detection.py
  4. the monitor's own CPU and memory, and a 24-hour trace      bench/monitor_cost.sh

Knobs: QUICK=1 (fewer rounds, shorter runs, for a smoke run).
"""

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
QUICK = os.environ.get("QUICK") == "1"


def sh(cmd, env=None):
    print("$ " + " ".join(cmd), file=sys.stderr)
    p = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, **(env or {})),
                       stdout=subprocess.PIPE, stderr=sys.stderr, universal_newlines=True)
    if p.returncode != 0:
        raise SystemExit("%s failed (%d)" % (" ".join(cmd), p.returncode))
    return p.stdout


def ensure(pkg, module):
    try:
        __import__(module)
    except ImportError:
        subprocess.run([PY, "-m", "pip", "install", "-q", pkg], check=True)


def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def torchfix_part(leakspy):
    """leakspy vs TorchFix on the same sample, paired rounds, alternating order."""
    ensure("torchfix", "torchfix")
    import torch

    sample = os.path.join(os.path.dirname(torch.__file__), "nn")
    files = sum(1 for _ in Path(sample).rglob("*.py"))
    torchfix = str(Path(PY).parent / "torchfix")
    ratios, lw, tw = [], [], []
    for r in range(2 if QUICK else 5):
        pair = [("leakspy", [leakspy, "check", "--exit-zero", "-q", sample]),
                ("torchfix", [torchfix, "--select", "ALL", sample])]
        if r % 2:
            pair.reverse()
        got = {name: wall(cmd) for name, cmd in pair}
        lw.append(got["leakspy"])
        tw.append(got["torchfix"])
        ratios.append(got["leakspy"] / got["torchfix"])
    return files, statistics.median(lw), statistics.median(tw), statistics.median(ratios)


def main():
    sh(["cargo", "build", "--release", "-q", "-p", "leakspy"])
    leakspy = str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release/leakspy")
    ensure("ruff", "ruff")

    ruff_out = sh([PY, "bench/check_vs_ruff.py", "--rounds", "2" if QUICK else "5"])
    ruff_ratio = re.search(r"wall-time ratio leakspy/ruff: median ([0-9.]+)", ruff_out).group(1)
    mem_ratio = re.search(r"peak-memory ratio leakspy/ruff: ([0-9.]+)", ruff_out).group(1)

    tf_files, tf_l, tf_t, tf_ratio = torchfix_part(leakspy)

    overhead_out = sh([PY, "bench/probe_overhead.py"],
                      env={"ROUNDS": "2" if QUICK else "4", "SECONDS": "12" if QUICK else "20",
                           "OUT": "/dev/null"})

    def ratio(label):
        for line in overhead_out.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 4 and cells[0] == label:
                return "%s, 95 %% interval of the median %s" % (cells[2], cells[3])
        return "?"

    calibration = re.search(r"measured ÷ predicted = \*\*(-?[0-9.]+)\*\* \(95 % interval (-?[0-9.]+–-?[0-9.]+)\)",
                            overhead_out)
    at_defaults = re.search(r"accounted for \*\*([0-9.]+ %)\*\*.*?predicted time ratio at defaults is "
                            r"\*\*([0-9.]+)×\*\* \(([0-9.]+–[0-9.]+)\)", overhead_out)

    excess_out = sh([PY, "bench/probe_excess.py"],
                    env={"SECONDS": "30" if QUICK else "120", "OUT": "/dev/null"})

    def excess_row(budget):
        for line in excess_out.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 9 and cells[0] == budget:
                return "%s (probe's own accounting %s; %s censuses judged)" % (cells[7], cells[8], cells[2])
        return "?"

    zoo_out = sh([PY, "bench/zoo_detection.py"],
                 env={"LEAKSPY": leakspy, "ZOO_SECONDS": "12" if QUICK else "20"})
    zoo_line = [line for line in zoo_out.splitlines() if line.startswith("Leaks found")][0]

    mon_file = Path(tempfile.mkdtemp()) / "monitor.md"
    sh(["bash", "bench/monitor_cost.sh"],
       env={"OUT": str(mon_file), "SECS": "15" if QUICK else "30", "HOURS": "4" if QUICK else "24"})
    mon_out = mon_file.read_text()

    rows = [
        ("`check` wall time vs ruff (`--select B,F,PLW`), torch's sources", "%s\u00d7 (memory %s\u00d7)" % (ruff_ratio, mem_ratio),
         "bench/check_vs_ruff.py --rounds 5"),
        ("`check` wall time vs TorchFix (`--select ALL`), torch/nn (%d files)" % tf_files,
         "%.4f\u00d7 (%.3f s vs %.2f s)" % (tf_ratio, tf_l, tf_t), "bench/table.py (torchfix_part)"),
        ("training loop under `leakspy run` (defaults) vs plain", ratio("leakspy run"),
         "bench/probe_overhead.py"),
        ("... the probe's work by its own accounting, at defaults (share of the loop's time)",
         at_defaults.group(1) if at_defaults else "?", "bench/probe_overhead.py"),
        ("... measured ÷ predicted slowdown, probe budgets 5–20 % (where wall time resolves it)",
         "%s (95 %% interval %s)" % calibration.groups() if calibration else "?", "bench/probe_overhead.py"),
        ("... predicted time ratio at defaults (accounting × calibration)",
         "%s× (%s)" % at_defaults.group(2, 3) if at_defaults else "?", "bench/probe_overhead.py"),
        ("... censuses' cost measured inside the loop (steps vs their neighbours), defaults",
         excess_row("0.01"), "bench/probe_excess.py"),
        ("... the same at `--probe-budget 0.2`", excess_row("0.2"), "bench/probe_excess.py"),
        ("... under `leakspy run --no-probe`", ratio("leakspy run --no-probe"), "bench/probe_overhead.py"),
        ("... under memray", ratio("memray run"), "bench/probe_overhead.py"),
        ("... under tracemalloc", ratio("python -X tracemalloc"), "bench/probe_overhead.py"),
        ("zoo detection", zoo_line.replace("**", ""), "bench/zoo_detection.py"),
    ]
    mon_cells = [[c.strip() for c in l.strip().strip("|").split("|")] for l in mon_out.splitlines()
                 if l.startswith("| ")]
    for cells in mon_cells:
        if len(cells) == 8 and cells[0] not in ("child", "---"):
            rows.append(("monitor's own cost, child %s" % cells[0],
                         "%s of one core, peak RSS %s" % (("0" + cells[3] if cells[3].startswith(".") else cells[3]), cells[7]), "bench/monitor_cost.sh"))
        if len(cells) == 3 and cells[0].endswith(" s"):
            rows.append(("`leakspy report` of a %s-hour 10 Hz trace" % ("4" if QUICK else "24"),
                         "%s, peak %s" % (cells[0], cells[1]), "bench/monitor_cost.sh"))
    table = ["| figure | value | command |", "| --- | --- | --- |"]
    table += ["| %s | %s | `%s` |" % r for r in rows]
    text = "\n".join([
        "# Benchmark table",
        "",
        "Written by `.venv/bin/python bench/table.py`%s on %s (%d CPUs). Ratios are measured side by "
        "side in one run (paired rounds, alternating order)." % (" with QUICK=1" if QUICK else "",
                                                                 time.strftime("%Y-%m-%d"), os.cpu_count()),
        "",
        *table,
        "",
        "## check vs ruff", "", "```", ruff_out.strip(), "```", "",
        "## Overhead on a healthy training loop", "", overhead_out.strip(), "",
        "## What censuses cost the loop, measured inside it", "", excess_out.strip(), "",
        "## Detection on the zoo", "", zoo_out.strip(), "",
        "## The monitor's own cost", "", mon_out.strip(), "",
    ])
    # Sections other scripts write (the corpus's precision, `bench/corpus/corpus.py report`) stay.
    results = ROOT / "bench/RESULTS.md"
    ours = {l for l in text.splitlines() if l.startswith("## ")}
    kept, keep = [], False
    for line in (results.read_text().splitlines() if results.exists() else []):
        if line.startswith("## "):
            keep = line not in ours
        if keep:
            kept.append(line)
    if kept:
        text = text.rstrip("\n") + "\n\n" + "\n".join(kept).rstrip("\n")
    results.write_text(text + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
