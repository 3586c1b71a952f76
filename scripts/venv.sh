#!/usr/bin/env bash
# Creates (or reuses) the project's Python environment in .venv from scripts/requirements.txt,
# pinned by scripts/constraints.txt. torch's PyPI wheel is the CUDA build (it runs on the CPU
# where there is no GPU): the venv is about 6 GB. The venv is a cache: delete it and this script
# makes it again; it is remade when the requirement files change. Prints the venv's path on
# stdout, progress on stderr.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${LEAKSPY_VENV:-$root/.venv}"
py="${PYTHON:-python3}"
want="$(cat "$root/scripts/requirements.txt" "$root/scripts/constraints.txt" | cksum | cut -d' ' -f1)"
stamp="$venv/.leakspy-deps"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "$venv"
  exit 0
fi
if [[ ! -x "$venv/bin/python" ]]; then
  echo "venv: creating $venv" >&2
  "$py" -m venv "$venv" >&2
fi
echo "venv: installing scripts/requirements.txt (torch with its CUDA libraries, about 6 GB; several minutes the first time)" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  -r "$root/scripts/requirements.txt" -c "$root/scripts/constraints.txt" >&2
echo "$want" >"$stamp"
echo "venv: ready" >&2
echo "$venv"
