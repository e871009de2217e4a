#!/usr/bin/env bash
# Create .venv with the CPU training stack, the project and its test tools.
# Idempotent: a stamp keyed on this script and the requirement files makes a second run instant.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
key=$(cat "$0" requirements/*.txt pyproject.toml | sha256sum | cut -c1-16)
stamp="$VENV/.rocmft-setup-$key"
if [[ -f $stamp ]]; then
  exit 0
fi
echo "==> setting up $VENV (CPU torch, LLaMA-Factory, DeepSpeed; ~2-3 min on 2 cores)"
[[ -x $VENV/bin/python ]] || "$PY" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# Some machines' pip config names local index folders that may not exist: pip warns once per package.
exec 2> >(grep -v --line-buffered "is ignored: it is neither a file nor a directory" >&2)
lock=(-c requirements/lock.txt)
# torch first, from the CPU wheel on disk: anything that asks for torch later is held to it by the lock.
"${pip[@]}" install "${lock[@]}" torch==2.13.0 setuptools wheel
"${pip[@]}" install "${lock[@]}" -r requirements/train.txt -r requirements/dev.txt
# DeepSpeed is an sdist: build isolation would fetch a CUDA torch to build it against. Its CPU ops
# (shm comm, cpu_adam) are JIT-compiled on first use into TORCH_EXTENSIONS_DIR (.cache/), not here,
# so `make demo` never waits for a compiler.
"${pip[@]}" install "${lock[@]}" --no-build-isolation deepspeed==0.19.8
# PyPI's torchvision/torchaudio for x86_64 are CUDA builds that do not load beside the CPU torch:
# - torchvision, when present, breaks `import transformers` ("operator torchvision::nms does not exist");
#   absent, transformers treats it as optional. LLaMA-Factory only needs it for image inputs.
# - torchaudio is imported unconditionally by llamafactory.data.mm_plugin; without its mismatched native
#   libraries it imports fine (audio datasets are then unsupported, which text fine-tuning never needs).
"${pip[@]}" uninstall -y torchvision >/dev/null 2>&1 || true
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -f "$site"/torchaudio/lib/*.so
"${pip[@]}" install --no-deps --no-build-isolation -e .
# Fail here, not in the first training run, if the stack does not import.
"$VENV/bin/python" - <<'PY'
import torch, llamafactory.data.mm_plugin, llamafactory.hparams, deepspeed  # noqa: F401
assert torch.version.cuda is None and torch.version.hip is None, f"expected the CPU torch, got {torch.__version__}"
print(f"    torch {torch.__version__}, llamafactory {llamafactory.hparams.__name__ and __import__('llamafactory').__version__}, deepspeed {deepspeed.__version__}")
PY
rm -f "$VENV"/.rocmft-setup-*
touch "$stamp"
echo "==> $VENV ready"
