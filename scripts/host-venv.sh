#!/usr/bin/env bash
# The light host: .venv with the rocmft CLI and its light dependencies (jinja2, pyyaml, rich, the Docker SDK).
# Enough to render, plan, build images and drive Docker, Slurm and Kubernetes; no torch, no LLaMA-Factory
# (the images hold those). Seconds; idempotent (a stamp keyed on what it installs).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv-lib.sh
key=$(cat scripts/host-venv.sh scripts/venv-lib.sh pyproject.toml "$LOCK" | sha256sum | cut -c1-16)
stamp="$VENV/.rocmft-host-$key"
[[ -f $stamp ]] && exit 0
check_python 3.10 3.13
lock_venv
[[ -f $stamp ]] && exit 0
echo "==> light host in $VENV: rocmft CLI + jinja2, pyyaml, rich, docker (no torch)"
ensure_venv
uv_install -e .
rm -f "$VENV"/.rocmft-host-*
touch "$stamp"
