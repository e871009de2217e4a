# Shared by host-venv.sh and setup-venv.sh (sourced from the project root): one venv, one lock, uv.
# uv installs in seconds what pip takes minutes for; it reads neither pip's config nor PIP_* variables,
# so anything pip was told (a wheel folder) is passed to it explicitly here.
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
LOCK=requirements/lock.txt
pin() { sed -n "s/^$1==//Ip" "$LOCK" | head -1; }

die() { echo "error: $*" >&2; exit 1; }

check_python() {
  command -v "$PY" >/dev/null || die "no $PY on PATH (set PYTHON=/path/to/python3.11 or 3.12)"
  "$PY" - <<'PYCHECK' || die "$("$PY" -V 2>&1) is not supported: use Python 3.10, 3.11 or 3.12 (PYTHON=python3.12)"
import sys
sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 12) else 1)
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
