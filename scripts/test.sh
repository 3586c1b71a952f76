#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs what the tests need on a fresh
# machine, then runs formatting, lints and every test. Every stage runs whatever failed
# before it (every cargo test binary, then pytest), and the end lists every failure; the
# exit status is non-zero when anything failed.
set -uo pipefail
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
# for the parser robustness test. Without it nothing below can run.
venv="$(scripts/venv.sh)" || { echo "test.sh: cannot make the venv (scripts/venv.sh failed)" >&2; exit 2; }
export LEAKSPY_PYTHON="$venv/bin/python"
LEAKSPY_TORCH_DIR="$("$LEAKSPY_PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
export LEAKSPY_TORCH_DIR

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
failed_stages=()
# A test binary prints nothing until its last test ends (the framework runs take minutes):
# every minute without output, one line says what is still running and for how long.
ticker() {
  local name="$1" start=$SECONDS size=-1 quiet_since=$SECONDS now running nap
  # `wait` on a background sleep, not a foreground one: the stage's end stops the ticker at
  # once instead of after the nap.
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  while sleep 15 & nap=$! && wait "$nap"; do
    now=$(wc -c <"$log")
    if [[ "$now" != "$size" ]]; then
      size=$now
      quiet_since=$SECONDS
    elif ((SECONDS - quiet_since >= 60)); then
      running="$(grep -a '^ *Running ' "$log" | tail -n 1 | sed 's/^ *Running //; s/ (.*//')"
      echo "   ... $name: $((SECONDS - start)) s in, $((SECONDS - quiet_since)) s without output${running:+ (running $running)}" >&2
      quiet_since=$SECONDS
    fi
  done
}

stage() {
  local name="$1"
  shift
  echo "== $name" >&2
  local start=$SECONDS
  ticker "$name" &
  local ticker_pid=$!
  "$@" 2>&1 | tee -a "$log"
  local status=${PIPESTATUS[0]}
  kill "$ticker_pid" 2>/dev/null
  wait "$ticker_pid" 2>/dev/null
  echo "== $name: $([[ $status -eq 0 ]] && echo ok || echo "FAILED (status $status)") in $((SECONDS - start)) s" >&2
  [[ $status -eq 0 ]] || failed_stages+=("$name")
}

stage "cargo fmt --check" cargo fmt --all -- --check
stage "cargo clippy" cargo clippy --workspace --all-targets --locked -- -D warnings
# --no-fail-fast: every test binary runs, whatever failed in the ones before.
stage "cargo test" cargo test --workspace --locked --no-fail-fast
# The Python package's own tests (the probe: real interpreters, a real socket; assert_no_leak
# and the pytest plugin; `pip install .` into a fresh venv). PYTHONPATH puts this checkout's
# package ahead of a copy `scripts/demo.sh` may have installed into the venv, and LEAKSPY_BIN
# the binary `cargo test` built (assert_no_leak's verdict is the binary's) ahead of that copy's.
stage "pytest python/tests bench/tests" env PYTHONPATH="$root/python" LEAKSPY_BIN="$root/target/debug/leakspy" "$LEAKSPY_PYTHON" -m pytest python/tests bench/tests -q -p no:cacheprovider

echo
# Every failed test, by name: cargo's "test NAME ... FAILED" lines (with the binary they ran
# in) and pytest's "FAILED path::name" summary lines.
awk '/^     Running / { bin = $0; sub(/.*deps\//, "", bin); sub(/-[0-9a-f]+\)$/, "", bin) }
     / \.\.\. FAILED$/ { sub(/^test /, ""); sub(/ \.\.\. FAILED$/, ""); print "FAILED " bin ": " $0 }
     /^FAILED / { print }' "$log" | sort -u
if ((${#failed_stages[@]})); then
  printf 'failed: %s\n' "$(IFS=,; echo "${failed_stages[*]}" | sed 's/,/, /g')"
fi
# One closing line for the whole suite (cargo's result lines and pytest's summary), last.
awk '/^test result:/ { p += $4; f += $6 }
     /^[0-9]+ (passed|failed)/ || /^=+ .*[0-9]+ (passed|failed)/ { for (i = 1; i < NF; i++) { w = $(i+1); sub(/[,;]$/, "", w); if (w == "passed") p += $i; if (w == "failed" || w == "error" || w == "errors") f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
((${#failed_stages[@]} == 0))
