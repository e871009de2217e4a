# Shared by host-venv.sh and setup-venv.sh (sourced from the project root): one venv, one lock, uv.
# uv installs in seconds what pip takes minutes for; it reads neither pip's config nor PIP_* variables,
# so anything pip was told (a wheel folder) is passed to it explicitly here.
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
# Every pin carries the sha256 of each of its files on PyPI (scripts/lock_hashes.py; torch, from PyTorch's CPU
# index, has none): uv checks every file it installs against them, constraints included (issue 43, L10).
LOCK=requirements/lock.txt
pin() { sed -n "s/^$1==\([^ ]*\).*/\1/Ip" "$LOCK" | head -1; }

die() { echo "error: $*" >&2; exit 1; }

# check_python MIN MAX: the light host runs on 3.10-3.13; the CPU training stack's pins need 3.11 or 3.12.
check_python() {
  command -v "$PY" >/dev/null || die "no $PY on PATH (set PYTHON=/path/to/python3.12)"
  "$PY" - "$1" "$2" <<'PYCHECK' || die "$("$PY" -V 2>&1) is not supported here: use Python $1 to $2 (e.g. PYTHON=python3.12)"
import sys
low, high = (tuple(int(x) for x in v.split(".")) for v in sys.argv[1:])
sys.exit(0 if low <= sys.version_info[:2] <= high else 1)
PYCHECK
}

# Two setups at once (two make invocations) would interleave installs in one venv.
lock_venv() {
  mkdir -p "$VENV"
  exec 9>"$VENV/.setup.lock"
  flock 9
}

# The venv (stdlib venv, so pip is there for `make wheelhouse`) and the pinned uv inside it:
# nothing is installed outside the project.
ensure_venv() {
  [[ -x $VENV/bin/python ]] || "$PY" -m venv "$VENV"
  local want
  want=$(pin uv)
  if [[ ! -x $VENV/bin/uv ]] || [[ $("$VENV/bin/uv" --version 2>/dev/null) != "uv $want"* ]]; then
    local out
    out=$("$VENV/bin/python" -m pip install -q --disable-pip-version-check "uv==$want" 2>&1) \
      || { printf '%s\n' "$out" | tail -5 >&2; die "could not install uv==$want with pip (your pip configuration applies here)"; }
  fi
}

uv_install() {
  "$VENV/bin/uv" pip install --python "$VENV/bin/python" -q -c "$LOCK" "$@"
}
