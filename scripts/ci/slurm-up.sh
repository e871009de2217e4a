#!/usr/bin/env bash
# Start a real 2-node Slurm cluster on this one machine for CI and `pytest -m slurm` (needs root).
#
#   scripts/ci/slurm-up.sh        # installs slurm-wlm + munge when missing, starts munged, slurmctld, slurmd n1 + n2
#   scripts/ci/slurm-down.sh      # stops them again
#
# Two slurmd daemons on localhost, each with its own port, spool and log, act as the nodes n1 and n2 of
# partition `debug`: `sbatch -N2` runs one task on each, exactly as on two machines (same host, so the run
# dir is trivially shared). One CPU per node: the machine has 2 cores, and asking Slurm for more CPUs than a
# node has is refused at submission instead of hanging.
#
# Idempotent: daemons that already answer are kept; a second run only waits until both nodes are idle.
# Refuses to overwrite a /etc/slurm/slurm.conf it did not write (a real cluster's config).
#
# Environment: ROCMFT_SLURM_DIR (default /var/lib/rocmft-slurm) holds state/, spool/<node>/, log/, pids.
# Traps seen on this setup (docs/multinode.md): SlurmctldHost must be the machine's real hostname;
# MinJobAge must be small or `sbatch --wait` polls for minutes; proctrack/pgid + task/none need no cgroups.
set -euo pipefail

DIR=${ROCMFT_SLURM_DIR:-/var/lib/rocmft-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by rocmft scripts/ci/slurm-up.sh"
NODES=(n1 n2)
CTLD_PORT=${ROCMFT_SLURMCTLD_PORT:-6817}
NODE_PORT_BASE=${ROCMFT_SLURMD_PORT_BASE:-6820}
log() { echo "slurm-up: $*" >&2; }

if [[ $(id -u) != 0 ]]; then
  log "needs root (apt-get, munged, slurmd); run with sudo"
  exit 1
fi

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1 || ! command -v sbatch >/dev/null 2>&1; then
  log "installing slurm-wlm and munge (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
fi

# ---------------------------------------------------------------- munge: Slurm's authentication
mkdir -p /run/munge /var/lib/munge /var/log/munge /etc/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
if [[ ! -s /etc/munge/munge.key ]]; then
  log "creating /etc/munge/munge.key"
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "reusing the running munged"
else
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 1 20); do
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
    sleep 0.25
  done
  munge -n | unmunge >/dev/null || { log "munged does not answer"; exit 1; }
fi

# ---------------------------------------------------------------- slurm.conf
host=$(hostname -s)
mkdir -p "$DIR/state" "$DIR/log" "$DIR/run" "$DIR/pids" /etc/slurm
for n in "${NODES[@]}"; do mkdir -p "$DIR/spool/$n"; done
want=$(cat <<EOF
$MARK (a 2-node test cluster on one machine)
ClusterName=rocmft-ci
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=$CTLD_PORT
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=4
KillWait=5
InactiveLimit=0
SlurmdTimeout=60
NodeName=n1 NodeHostname=localhost Port=$((NODE_PORT_BASE + 1)) CPUs=1 RealMemory=1000 State=UNKNOWN
NodeName=n2 NodeHostname=localhost Port=$((NODE_PORT_BASE + 2)) CPUs=1 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=60 State=UP
EOF
)
if [[ -f $CONF ]] && ! head -n1 "$CONF" | grep -qF "$MARK"; then
  log "$CONF exists and was not written by this script: refusing to replace a real cluster's config"
  exit 1
fi
changed=0
if [[ ! -f $CONF ]] || [[ $(cat "$CONF") != "$want" ]]; then
  printf '%s\n' "$want" >"$CONF"
  changed=1
fi

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# ---------------------------------------------------------------- daemons
if ((changed)); then
  # A new config: restart what runs with the old one.
  for pidfile in "$DIR"/pids/*.pid; do
    if alive "$pidfile"; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
  done
  sleep 1
fi
if alive "$DIR/pids/slurmctld.pid" && scontrol ping 2>/dev/null | grep -q UP; then
  log "reusing the running slurmctld"
else
  log "starting slurmctld (log $DIR/log/slurmctld.log)"
  # -c: a clean controller state (no jobs or node states left from an earlier cluster).
  setsid /usr/sbin/slurmctld -D -c -f "$CONF" >>"$DIR/log/slurmctld.out" 2>&1 </dev/null &
  echo $! >"$DIR/pids/slurmctld.pid"
  for _ in $(seq 1 40); do
    scontrol ping 2>/dev/null | grep -q UP && break
    sleep 0.25
  done
  scontrol ping 2>/dev/null | grep -q UP || { log "slurmctld did not come up:"; tail -n 20 "$DIR/log/slurmctld.log" >&2 || true; exit 1; }
fi
for n in "${NODES[@]}"; do
  if alive "$DIR/pids/slurmd-$n.pid"; then
    log "reusing slurmd $n"
  else
    log "starting slurmd $n (log $DIR/log/slurmd-$n.log)"
    setsid /usr/sbin/slurmd -D -N "$n" -f "$CONF" >>"$DIR/log/slurmd-$n.out" 2>&1 </dev/null &
    echo $! >"$DIR/pids/slurmd-$n.pid"
  fi
done

# ---------------------------------------------------------------- both nodes idle
state() { sinfo -h -N -o '%N %t' 2>/dev/null | sort -u; }
for i in $(seq 1 60); do
  s=$(state)
  if [[ $(grep -c ' idle$' <<<"$s") == "${#NODES[@]}" ]]; then
    log "cluster ready: $(tr '\n' ' ' <<<"$s")(partition debug, ${#NODES[@]} nodes x 1 CPU)"
    exit 0
  fi
  # A node that registered as down/drained (e.g. left over from an earlier run) is resumed once.
  if ((i == 8)) && grep -qE ' (down|drain|drng|unk)\*?$' <<<"$s"; then
    scontrol update nodename="$(IFS=,; echo "${NODES[*]}")" state=resume 2>/dev/null || true
  fi
  sleep 0.5
done
log "nodes not idle after 30 s: $(state | tr '\n' ' ')"
sinfo -R >&2 || true
for n in "${NODES[@]}"; do tail -n 10 "$DIR/log/slurmd-$n.log" >&2 2>/dev/null || true; done
exit 1
