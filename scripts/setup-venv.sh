#!/usr/bin/env bash
# The CPU training venv (make demo, make test, RUNTIME=local): the light host, then the CPU build of torch,
# LLaMA-Factory, DeepSpeed, bitsandbytes and the test tools, every version from requirements/lock.txt.
#
# Where the CPU torch comes from, first match:
#   TORCH_INDEX_URL   a PyTorch-style wheel index (or a folder of wheels) you name
#   pip's find-links  a wheel folder your pip is configured with (PIP_FIND_LINKS, pip.conf), if it holds the wheel
#   default           PyTorch's CPU index, https://download.pytorch.org/whl/cpu
# Never PyPI: on Linux x86_64 PyPI's torch is the CUDA build (~15 nvidia-* packages, several GB).
# Idempotent: a stamp keyed on the scripts and requirement files makes a second run instant.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv-lib.sh
check_python 3.11 3.12
bash scripts/host-venv.sh
key=$(cat scripts/setup-venv.sh scripts/host-venv.sh scripts/venv-lib.sh requirements/*.txt pyproject.toml | sha256sum | cut -c1-16)
stamp="$VENV/.rocmft-setup-$key"
[[ -f $stamp ]] && exit 0
lock_venv
[[ -f $stamp ]] && exit 0

torch=$(pin torch)
pytag=cp$("$VENV/bin/python" -c 'import sys; print("%d%d" % sys.version_info[:2])')
CPU_INDEX=https://download.pytorch.org/whl/cpu

# A folder of wheels pip was told about (find-links), holding this torch for this Python.
pip_wheel_folder() {
  local dirs d
  dirs=$( { "$VENV/bin/python" -m pip config list 2>/dev/null | sed -n "s/^[^=]*find-links='\(.*\)'$/\1/p"
            printf '%s\n' "${PIP_FIND_LINKS:-}"; } | tr ' ' '\n' | sed 's|^file://||')
  for d in $dirs; do
    if [[ -d $d ]] && compgen -G "$d/torch-$torch[+-]*$pytag-*.whl" >/dev/null; then
      echo "$d"
      return
    fi
  done
}

if [[ -n ${TORCH_INDEX_URL:-} ]]; then
  where="TORCH_INDEX_URL=$TORCH_INDEX_URL"
  if [[ -d $TORCH_INDEX_URL ]]; then src=(--no-index --find-links "$TORCH_INDEX_URL"); else src=(--index-url "$TORCH_INDEX_URL"); fi
elif folder=$(pip_wheel_folder) && [[ -n $folder ]]; then
  where="pip's wheel folder $folder"
  src=(--no-index --find-links "$folder")
else
  where="PyTorch's CPU index $CPU_INDEX"
  src=(--index-url "$CPU_INDEX")
fi

echo "==> CPU training stack in $VENV: torch $torch (CPU, from $where), LLaMA-Factory, DeepSpeed (~1-2 min)"
# torch alone and without its dependencies from that one source; everything after resolves against the
# installed CPU torch (uv keeps an installed version that satisfies the lock) and takes the rest from PyPI.
uv_install --no-deps "${src[@]}" "torch==$torch" 2>/dev/null \
  || die "no CPU torch $torch wheel for $pytag at $where: set TORCH_INDEX_URL to a PyTorch CPU wheel index or a folder holding torch-$torch+cpu-$pytag-*.whl"
uv_install "torch==$torch" setuptools wheel -r requirements/train.txt -r requirements/dev.txt
# bitsandbytes (QLoRA) and the like: their own requirements are met above; resolving them again could swap the
# CPU torch for PyPI's CUDA build (requirements/no-deps.txt).
uv_install --no-deps -r requirements/no-deps.txt
# PyPI's torchvision/torchaudio for x86_64 are CUDA builds that do not load beside the CPU torch:
# - torchvision, when present, breaks `import transformers` ("operator torchvision::nms does not exist");
#   absent, transformers treats it as optional. LLaMA-Factory only needs it for image inputs.
# - torchaudio is imported unconditionally by llamafactory.data.mm_plugin; without its mismatched native
#   libraries it imports fine (audio datasets are then unsupported, which text fine-tuning never needs).
"$VENV/bin/uv" pip uninstall --python "$VENV/bin/python" -q torchvision 2>/dev/null || true
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -f "$site"/torchaudio/lib/*.so
# Fail here, not in the first training run, if the stack does not import or is not the CPU build.
# (DeepSpeed logs on every import that it found no accelerator, to stdout: only the check's own lines shown)
# The check imports what every rocmft process imports (validation: LLaMA-Factory's parser, DeepSpeed's config;
# training: run_exp) with bytecode writing on, so their ~5,000 modules are compiled once, here: uv installs
# none, and where PYTHONDONTWRITEBYTECODE=1 (CI, many shells) each process would compile them from source
# again (`rocmft validate` of a plain file: ~20 s of CPU -> ~8 s on 2 cores; benchmarks/validate_speed.py).
# It is the largest part of a fresh clone's `make demo` (~30 s of ~50 s of setup, one core: compiling is one
# process's work), so it runs as two processes at once: "train" (torch, transformers, LLaMA-Factory) starts now,
# while uv builds DeepSpeed, and "extras" (DeepSpeed, bitsandbytes) once DeepSpeed is in. "train" never imports
# the deepspeed package (transformers and accelerate only look for it when a config names it), so the install
# beside it is safe. Measured on 2 shared cores: this part of `make setup` (uv's stack install, DeepSpeed's build,
# the check) 42-47 s -> 28-30 s when the second core is free; nothing gained on a busy machine (docs/development.md,
# "Where a fresh clone's make demo spends its time").
check_dir=$(mktemp -d)
# A check still running when setup stops is stopped (errexit holds in the trap: `kill` of no job would end it).
trap 'running=$(jobs -p); [[ -z $running ]] || kill $running 2>/dev/null || true; rm -rf "$check_dir"' EXIT
stack_check() {
  env -u PYTHONDONTWRITEBYTECODE "$VENV/bin/python" - "$1" "$where" "$CPU_INDEX" >"$check_dir/$1" 2>&1 <<'PY'
import importlib.metadata as md
import sys

part, where, cpu_index = sys.argv[1:]
if part == "train":
    import llamafactory, llamafactory.data.mm_plugin, llamafactory.hparams, llamafactory.train.tuner  # noqa: F401
    import torch

    gpu = sorted(d.metadata["Name"] for d in md.distributions() if d.metadata["Name"].lower().startswith("nvidia"))
    if torch.version.cuda or torch.version.hip or gpu:
        sys.exit(f"error: torch {torch.__version__} from {where} is not the CPU build (nvidia packages: "
                 f"{', '.join(gpu) or 'none'}): point TORCH_INDEX_URL at a CPU wheel index ({cpu_index}) and remove .venv")
    print(f"rocmft-check:    torch {torch.__version__}, llamafactory {llamafactory.__version__}")
else:
    import deepspeed, deepspeed.runtime.config  # noqa: F401
    import bitsandbytes  # noqa: F401  (imports torch's inductor: ~7 s of CPU, compiled here once)

    print(f"rocmft-check:, deepspeed {deepspeed.__version__}, bitsandbytes {bitsandbytes.__version__}")
PY
}
# The check's log when it failed (its last lines, DeepSpeed's accelerator notice left out), nothing when it passed.
check_failed() {
  wait "$1" && return 1
  grep -v real_accelerator "$check_dir/$2" | tail -20 >&2
}
stack_check train &
train_check=$!
# DeepSpeed is an sdist: build isolation would fetch a CUDA torch to build it against. Its CPU ops
# (shm comm, cpu_adam) are JIT-compiled on first use into TORCH_EXTENSIONS_DIR (.cache/), not here,
# so `make demo` never waits for a compiler.
# 0.19.8 is above LLaMA-Factory 0.9.5's tested cap (its requirements/deepspeed.txt, a file of its repo: its wheel's
# metadata has no DeepSpeed bound, and hparams/parser.py only checks that DeepSpeed is installed).
# Kept, on measured evidence with exactly this stack (LLaMA-Factory 0.9.5, transformers 5.6.0, accelerate 1.11.0):
# results/gpu_truth-nvidia-h200.csv trained llama3-8b-z3 (ZeRO-3 LoRA) and llama3-8b-full-z3 (ZeRO-3 full), 6 steps on one H200,
# with DeepSpeed 0.19.8 (status ok), and CI trains ZeRO-2/ZeRO-3 on CPU with it (tests/train/test_train_cpu.py).
# uv caches no `--no-build-isolation` build, so every setup rebuilt the sdist (8 s of a fresh clone's `make demo`,
# docs/development.md). The wheel is built once into the user's cache, keyed by DeepSpeed's and torch's versions
# (its build records the torch it saw, git_version_info.py), and installed from there after. Cost: one ~1 MB
# file outside the project, like uv's own cache; ROCMFT_WHEEL_CACHE= moves it.
ds="deepspeed==$(pin deepspeed)"
ds_cache="${ROCMFT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rocmft/wheels}/$(pin deepspeed)-torch$torch"
# A kept wheel counts only with the sha256 recorded when it was built (<wheel>.sha256), and is installed only when it
# still has it (issue 43, L10): the sdist it is built from is checked against the lock's hashes (pip's hash mode:
# the lock's deepspeed line is the requirement), and uv checks no hash of a local wheel file itself.
cached_wheel() { local w; for w in "$ds_cache"/deepspeed-*.whl; do [[ -f $w && -f $w.sha256 ]] && echo "$w" && return; done; return 0; }
ds_wheel=$(cached_wheel)
if [[ -z $ds_wheel ]] && mkdir -p "$ds_cache" 2>/dev/null; then
  tmp_wheels=$(mktemp -d "$ds_cache.XXXXXX")
  if "$VENV/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation --require-hashes \
       -w "$tmp_wheels" -r <(grep -i '^deepspeed==' "$LOCK") >/dev/null 2>&1; then
    for w in "$tmp_wheels"/deepspeed-*.whl; do sha256sum "$w" | cut -d' ' -f1 > "$w.sha256"; done
    mv "$tmp_wheels"/deepspeed-*.whl "$tmp_wheels"/deepspeed-*.whl.sha256 "$ds_cache"/ || true
  fi
  rm -rf "$tmp_wheels"
  ds_wheel=$(cached_wheel)
fi
if [[ -n $ds_wheel ]]; then
  [[ $(sha256sum "$ds_wheel" | cut -d' ' -f1) == "$(cat "$ds_wheel.sha256")" ]] \
    || { wait "$train_check"; die "$ds_wheel is not the wheel built here (its sha256 differs from the one recorded then): delete $ds_cache and run make setup again"; }
fi
uv_install --no-build-isolation "${ds_wheel:-$ds}" || { wait "$train_check"; exit 1; }
stack_check extras &
extras_check=$!
failed=0
check_failed "$train_check" train && failed=1
check_failed "$extras_check" extras && failed=1
[[ $failed == 0 ]] || exit 1
# The versions, one line from the checks' own lines: everything else they printed was the libraries'.
sed -n 's/^rocmft-check://p' "$check_dir/train" "$check_dir/extras" | tr -d '\n'
echo
rm -f "$VENV"/.rocmft-setup-*
touch "$stamp"
echo "==> $VENV ready"
