#!/usr/bin/env bash
# The README's first command: builds leakspy, makes the Python environment, then runs the main
# job on the bundled example: the static check, and a recorded run with its diagnosis.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo build --release --locked -q -p leakspy
venv="$(scripts/venv.sh)"
leakspy="$root/target/release/leakspy"
mkdir -p leakspy-runs

echo "== leakspy check examples/leaky_train.py"
"$leakspy" check examples/leaky_train.py || [[ $? -eq 1 ]]

echo
echo "== leakspy run --probe-budget 0.3 -- python examples/leaky_train.py --generations 10"
# The demo lasts seconds, not hours: the probe may spend 30 % of it on censuses
# (the default, 1 %, would take its first census only after 10 s), and it
# needs five censuses to name a holder.
"$leakspy" run --trace leakspy-runs/demo.jsonl --probe-budget 0.3 \
  --report-json leakspy-runs/demo.json --report-html leakspy-runs/demo.html \
  -- "$venv/bin/python" examples/leaky_train.py --generations 10 "$@"
echo
echo "Trace: leakspy-runs/demo.jsonl   Report: leakspy-runs/demo.html (open it in a browser)"
