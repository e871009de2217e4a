#!/usr/bin/env bash
# Stop the local test cluster started by scripts/ci/slurm-up.sh: jobs, slurmd n1/n2, slurmctld, munged.
# Only the daemons whose pid files slurm-up.sh wrote are stopped; safe to run when nothing is running.
set -uo pipefail

DIR=${ROCMFT_SLURM_DIR:-/var/lib/rocmft-slurm}
log() { echo "slurm-down: $*" >&2; }

if command -v scancel >/dev/null 2>&1 && scontrol ping 2>/dev/null | grep -q UP; then
  scancel --quiet --full --user="$(id -un)" 2>/dev/null || true
fi
stop() {  # pidfile name (pid files written by slurm-up.sh)
  local pidfile=$1 name=$2 pid
  [[ -f $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$pidfile"
}
for pidfile in "$DIR"/pids/slurmd-*.pid; do
  [[ -e $pidfile ]] || continue
  name=${pidfile##*/}
  stop "$pidfile" "${name%.pid}"
done
stop "$DIR/pids/slurmctld.pid" slurmctld
if [[ ${ROCMFT_SLURM_KEEP_MUNGE:-0} != 1 && -f /run/munge/munged.pid ]]; then
  stop /run/munge/munged.pid munged
fi
exit 0
