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
echo "== leakspy run -- python examples/leaky_train.py"
"$leakspy" run --trace leakspy-runs/demo.jsonl \
  --report-json leakspy-runs/demo.json --report-html leakspy-runs/demo.html \
  -- "$venv/bin/python" examples/leaky_train.py "$@"
echo
echo "Trace: leakspy-runs/demo.jsonl   Report: leakspy-runs/demo.html (open it in a browser)"
