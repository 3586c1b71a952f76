#!/usr/bin/env bash
# The README's first command: makes the Python environment, installs leakspy into it as a user
# would (`pip install .`: maturin builds the binary), then runs the main job on the bundled
# example: the static check, and a recorded run with its diagnosis.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$(scripts/venv.sh)"
echo "== pip install . (builds leakspy in release mode; a few minutes the first time)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$root"
leakspy="$venv/bin/leakspy"
mkdir -p leakspy-runs

echo "== leakspy check examples/leaky_train.py"
"$leakspy" check examples/leaky_train.py || [[ $? -eq 1 ]]

echo
echo "== leakspy run -- python examples/leaky_train.py --generations 10"
# At the defaults: the monitor sees memory grow within seconds and the probe's
# burst of censuses names what grows, who holds it and which line made it.
"$leakspy" run --trace leakspy-runs/demo.jsonl \
  --report-json leakspy-runs/demo.json --report-html leakspy-runs/demo.html \
  -- "$venv/bin/python" examples/leaky_train.py --generations 10 "$@"
echo
echo "Trace: leakspy-runs/demo.jsonl   Report: leakspy-runs/demo.html (open it in a browser)"
