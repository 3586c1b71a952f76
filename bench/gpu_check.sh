#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU: a CUDA training loop that
# keeps a tensor with its graph on the GPU every step (the loss-list leak of
# examples/zoo, on the device), and the same loop kept healthy, each under
# `leakspy run` at its defaults. Prints, from each JSON report and trace:
# the verdict, the holder and the line the probe named, CUDA memory
# allocated vs reserved (the probe's censuses) and NVML's per-process
# figures (the monitor's samples).
#
#     bash bench/gpu_check.sh [SECONDS]     # from a checkout; 40 s a run by default
#
# Needs a Python with a CUDA build of torch (.venv's, or PYTHON=...), and a
# leakspy binary (target/release/leakspy, built with cargo when missing, or
# LEAKSPY=...). Expected: the leak is LEAK, held by
# Trainer.kept (list), made in Trainer.step; CUDA allocated grows with
# reserved; NVML shows the job's process growing. The healthy loop is not a
# leak and nothing is held; reserved may sit above allocated (the caching
# allocator), which the report says is not a leak.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-40}
py="${PYTHON:-$root/.venv/bin/python}"
bin="${LEAKSPY:-$root/target/release/leakspy}"
if [[ ! -x "$bin" ]]; then
  (cd "$root" && cargo build --release -q -p leakspy)
fi
"$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "torch sees no CUDA device")'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/cuda_loop.py" <<'EOF'
"""A CUDA training loop. `leak`: keeps each step's hidden activations (with
their graph) in Trainer.kept, about 1 MiB of device memory a step.
`healthy`: keeps the loss as a float."""

import sys
import time

import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, leak):
        self.leak = leak
        self.body = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU()).cuda()
        self.head = torch.nn.Linear(1024, 10).cuda()
        params = list(self.body.parameters()) + list(self.head.parameters())
        self.opt = torch.optim.Adam(params, lr=1e-3)
        self.kept = []

    def step(self, x, y):
        h = self.body(x)  # MADE_HERE
        loss = F.cross_entropy(self.head(h), y)
        self.opt.zero_grad()
        loss.backward(retain_graph=self.leak)
        self.opt.step()
        if self.leak:
            self.kept.append(h)
        else:
            self.kept = self.kept[-100:] + [loss.item()]


def main():
    mode, seconds = sys.argv[1], float(sys.argv[2])
    torch.manual_seed(0)
    trainer = Trainer(mode == "leak")
    x = torch.randn(256, 512, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")
    t0 = time.monotonic()
    steps = 0
    while time.monotonic() - t0 < seconds:
        trainer.step(x, y)
        torch.cuda.synchronize()
        steps += 1
        time.sleep(0.002)
    print("optimizer steps:", steps, flush=True)


main()
EOF

for mode in leak healthy; do
  echo "== $mode: leakspy run -- python cuda_loop.py $mode $seconds"
  "$bin" run -q --trace "$work/$mode.jsonl" --report-json "$work/$mode.json" \
    -- "$py" "$work/cuda_loop.py" "$mode" "$seconds" > "$work/$mode.out" 2> "$work/$mode.err" || true
  cat "$work/$mode.out"
  "$py" - "$work/$mode.json" "$work/$mode.jsonl" <<'EOF'
import json
import sys

report = json.load(open(sys.argv[1]))
print("verdict:", report["verdict"], "-", report["summary"])
print("steps:", report["run"]["steps"], "| probe:", (report["probe"].get("cost") or {}))
for g in report.get("growth", [])[:3]:
    h = g.get("holder") or {}
    made = g.get("created_at") or {}
    print("held by:", h.get("path"), "(%s)" % h.get("container"), "made at line", made.get("line"),
          "in", made.get("function"))
    for gr in g["growers"][:4]:
        print("   %+.3g %s per %s" % (gr["slope"], gr["what"], gr["per"]))
if report.get("no_holder"):
    print("no holder:", report["no_holder"])
cuda, gpus, pid = [], [], None
with open(sys.argv[2]) as f:
    pid = json.loads(f.readline()).get("pid")
    for line in f:
        m = json.loads(line)
        if m.get("kind") == "census" and m.get("cuda"):
            cuda.append((m["t"], m["cuda"]["allocated"], m["cuda"]["reserved"]))
        elif m.get("kind") == "gpu":
            gpus.append(m)
mib = 1048576.0
if cuda:
    (t0, a0, r0), (t1, a1, r1) = cuda[0], cuda[-1]
    print("CUDA (probe censuses, %d): allocated %.1f -> %.1f MiB, reserved %.1f -> %.1f MiB "
          "(%.0f s to %.0f s)" % (len(cuda), a0 / mib, a1 / mib, r0 / mib, r1 / mib, t0, t1))
else:
    print("CUDA: no census saw CUDA initialised")
if gpus:
    first, last = gpus[0], gpus[-1]
    for d0, d1 in zip(first["devices"], last["devices"]):
        procs = {p["pid"]: p["used"] for p in d1.get("procs", [])}
        procs0 = {p["pid"]: p["used"] for p in d0.get("procs", [])}
        print("NVML GPU %d (%s): used %.0f -> %.0f MiB; per process: %s" % (
            d1["index"], d1["name"], d0["used"] / mib, d1["used"] / mib,
            ", ".join("pid %d %.0f -> %.0f MiB" % (p, procs0.get(p, 0) / mib, u / mib)
                      for p, u in procs.items()) or "none of the job's"))
else:
    print("NVML: no gpu events (no driver?)")
for n in report.get("notes", []):
    if "CUDA" in n or "GPU" in n:
        print("note:", n)
EOF
  echo
done
