#!/usr/bin/env bash
# The README's first command: makes the Python environment, installs leakspy into it as a user
# would (`pip install .`: maturin builds the binary), then runs the main job on the bundled
# example: the static check, and a recorded run with its diagnosis. Says what each stage does
# and about how long it takes; a long stage prints how far it has got every 15 s.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

took() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }

# Runs a long command with its output in a log: every 15 s one line with the time so far
# and the last thing it printed (pip's download, cargo's crate), never a silent minute. The
# command's stdout goes to $1 ("-": into the log too). On failure, the end of the log.
with_progress() {
  local out="$1" log start next=15 status=0 last shown="" since=0
  shift
  log="$(mktemp)"
  start=$SECONDS
  if [[ "$out" == - ]]; then out="$log"; fi
  "$@" 2>>"$log" >>"$out" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    # Due times, not multiples of 15: a loaded machine may skip a second.
    if ((SECONDS - start >= next)) && kill -0 "$pid" 2>/dev/null; then
      next=$((SECONDS - start + 15))
      # Text only (-a: a torn multi-byte character is not "binary"), and no
      # line that is only a progress bar.
      last="$(tail -c 4000 "$log" | tr '\r' '\n' | grep -av '^[[:space:]]*$' \
        | grep -av '^[[:space:]━╸╺╾─|#=>.-]*$' | tail -n 1 | cut -c1-100)"
      if [[ -n "$last" && "$last" == "$shown" ]]; then
        # Nothing new: say so rather than repeat a stale line as news.
        echo "   ... $(took $((SECONDS - start))): still working (no new output for $((SECONDS - since)) s)"
      else
        shown="$last"
        since=$SECONDS
        echo "   ... $(took $((SECONDS - start))): ${last:-working}"
      fi
    fi
  done
  wait "$pid" || status=$?
  if ((status != 0)); then
    echo "   failed (status $status); the end of its output:" >&2
    tail -n 30 "$log" >&2
    rm -f "$log"
    return "$status"
  fi
  rm -f "$log"
}

t0=$SECONDS
venv="${LEAKSPY_VENV:-$root/.venv}"
echo "== 1/3 Python environment in ${venv#"$root"/}: torch, numpy, matplotlib (and what the tests use)"
if [[ -f "$venv/.leakspy-deps" ]]; then
  echo "   (made before: checked in a second, remade only when scripts/requirements.txt changed)"
else
  echo "   first time: downloads torch's CUDA build and NVIDIA's libraries from PyPI, 5.9 GB once"
  echo "   installed; several minutes, most of it the download (2 min 15 s on a fresh 2-core machine)"
fi
venv_out="$(mktemp)"
with_progress "$venv_out" scripts/venv.sh
venv="$(tail -n 1 "$venv_out")"
rm -f "$venv_out"
t1=$SECONDS
echo "   done in $(took $((t1 - t0)))"

echo "== 2/3 pip install . : maturin builds leakspy in release mode and installs it into the venv"
if [[ -x "$venv/bin/leakspy" ]]; then
  echo "   (built before: cargo rebuilds only what changed)"
else
  echo "   first time: compiles about 140 crates, about 7 min on 2 busy cores (target/release: 0.4 GB)"
fi
with_progress - "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
  --no-deps -v "$root"
leakspy="$venv/bin/leakspy"
t2=$SECONDS
echo "   done in $(took $((t2 - t1))): $("$leakspy" --version)"

echo "== 3/3 the leaky example: leakspy check, then leakspy run (a recorded training run, 1-2 min)"
echo
echo "\$ leakspy check examples/leaky_train.py"
"$leakspy" check examples/leaky_train.py || [[ $? -eq 1 ]]
echo
echo "\$ leakspy run -- python examples/leaky_train.py --generations 10 --seconds 45"
# At the defaults: the monitor sees memory grow within seconds and the probe's
# burst of censuses names what grows, who holds it and which line made it.
"$leakspy" run --trace leakspy-runs/demo.jsonl \
  --report-json leakspy-runs/demo.json --report-html leakspy-runs/demo.html \
  -- "$venv/bin/python" examples/leaky_train.py --generations 10 --seconds 45 "$@"
t3=$SECONDS
echo
echo "Demo done in $(took $((t3 - t0))): environment $(took $((t1 - t0))), build $(took $((t2 - t1))), run $(took $((t3 - t2)))."
echo "Trace: leakspy-runs/demo.jsonl   Report: leakspy-runs/demo.html (open it in a browser)"
echo "leakspy is installed in the venv: run ${leakspy#"$root"/} (e.g. \`${leakspy#"$root"/} check src/\`),"
echo "or \`source ${venv#"$root"/}/bin/activate\` and then plain \`leakspy\`; run your job with the venv's"
echo "python (\`leakspy run -- ${venv#"$root"/}/bin/python train.py\`) or one that has its packages."
