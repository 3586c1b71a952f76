#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs what the tests need on a fresh
# machine, then runs formatting, lints and every test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Headless Chromium renders the HTML report in a test.
if ! command -v chromium >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium (apt-get)..." >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "warning: chromium is missing and cannot be installed here: the HTML test will fail in CI" >&2
  fi
fi

# Python venv with torch: the real training programs the tests run, and torch's own sources
# for the parser robustness test.
venv="$(scripts/venv.sh)"
export LEAKSPY_PYTHON="$venv/bin/python"
LEAKSPY_TORCH_DIR="$("$LEAKSPY_PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LEAKSPY_TORCH_DIR

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cargo test --workspace --locked 2>&1 | tee "$log"
# The Python package's own tests (the probe: real interpreters, a real socket; assert_no_leak
# and the pytest plugin; `pip install .` into a fresh venv). PYTHONPATH puts this checkout's
# package ahead of a copy `scripts/demo.sh` may have installed into the venv.
PYTHONPATH="$root/python" "$LEAKSPY_PYTHON" -m pytest python/tests -q -p no:cacheprovider 2>&1 | tee -a "$log"
# One closing line for the whole suite (cargo's result lines and pytest's summary).
awk '/^test result:/ { p += $4; f += $6 }
     /^[0-9]+ (passed|failed)/ { for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
