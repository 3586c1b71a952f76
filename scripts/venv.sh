#!/usr/bin/env bash
# Creates (or reuses) the project's Python environment in .venv: torch (CPU use of
# the PyPI wheel), numpy, matplotlib, pytest, ruff (the check benchmark) and
# prometheus_client (its OpenMetrics parser checks `--prometheus`). The venv is a cache: delete it and
# this script makes it again.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${LEAKSPY_VENV:-$root/.venv}"
py="${PYTHON:-python3}"
stamp="$venv/.leakspy-deps-v2"
if [[ -f "$stamp" ]]; then
  echo "$venv"
  exit 0
fi
if [[ ! -x "$venv/bin/python" ]]; then
  "$py" -m venv "$venv" >&2
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  torch numpy matplotlib pytest ruff prometheus_client >&2
touch "$stamp"
echo "$venv"
