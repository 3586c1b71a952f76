#!/usr/bin/env bash
# Creates (or reuses) the project's Python environment in .venv from scripts/requirements.txt,
# pinned by scripts/constraints.txt. torch's PyPI wheel is the CUDA build: it brings NVIDIA's
# CUDA libraries and Triton (4.0 GB of the venv's 5.9 GB) and runs on the CPU where there is
# no GPU, as the tests and the demo use it. Beside torch, numpy and matplotlib (the demo), the venv
# holds what the tests use: pytest, ruff, prometheus_client, real frameworks (Lightning,
# Transformers, Accelerate, Stable-Baselines3, Gymnasium) and Jupyter's kernel packages.
# The venv is a cache: delete it and this script makes it again; it is remade when the
# requirement files change. Prints the venv's path on stdout, progress (pip's own) on stderr.
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
  echo "venv: creating $venv with $("$py" --version 2>&1)" >&2
  "$py" -m venv "$venv" >&2
fi
# pip fails far into the download with "No space left on device" and a half-made venv; say it
# before starting. Measured on a fresh machine: 5.9 GB installed, 3.3 GB of wheels in pip's
# cache, and up to 0.5 GB per wheel being unpacked. What an earlier try installed counts.
need_kb=$((10 * 1024 * 1024 - $(du -sk "$venv" 2>/dev/null | cut -f1)))
free_kb="$(df -Pk "$venv" | awk 'NR == 2 { print $4 }')"
if ((free_kb < need_kb)); then
  echo "venv: not enough disk space: installing torch and the rest needs about $((need_kb / 1048576 + 1)) GB free where $venv is, and $((free_kb / 1048576)) GB is. Free some space (pip's cache: \`python3 -m pip cache purge\`), or set LEAKSPY_VENV to a folder on a larger disk, then run this again." >&2
  exit 1
fi
echo "venv: installing scripts/requirements.txt, pinned by scripts/constraints.txt: torch (PyPI's CUDA build, which runs on the CPU too) with NVIDIA's CUDA libraries, numpy, matplotlib, and the frameworks and Jupyter packages the tests use. About 5.9 GB once installed; the first time, most of it is downloaded from PyPI." >&2
"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off --upgrade pip >&2
"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
  -r "$root/scripts/requirements.txt" -c "$root/scripts/constraints.txt" >&2
echo "$want" >"$stamp"
echo "venv: ready ($(du -sh "$venv" 2>/dev/null | cut -f1))" >&2
echo "$venv"
