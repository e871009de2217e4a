#!/usr/bin/env bash
# Start a private Docker daemon for CI and the image tests (needs root).
#
#   eval "$(scripts/ci/dockerd-up.sh)"     # exports DOCKER_HOST for this shell
#
# Installs Debian's docker.io (and debootstrap, for scripts/ci/build-cpu-base.sh) when missing, then
# starts dockerd in the background with its own socket, data root and exec root, so it neither needs nor
# disturbs a system daemon. Idempotent: a daemon already answering on the socket is reused.
# stdout carries only the `export DOCKER_HOST=...` line; progress goes to stderr.
#
# Environment: ROCMFT_DOCKER_DIR (default /var/lib/rocmft-docker) holds data/, exec/, docker.sock,
# dockerd.log and dockerd.pid. The exec root must be a short path (containerd's socket path limit).
set -euo pipefail

DIR=${ROCMFT_DOCKER_DIR:-/var/lib/rocmft-docker}
SOCK=$DIR/docker.sock
EXEC_ROOT=${ROCMFT_DOCKER_EXEC_ROOT:-/run/rocmft-docker}
LOG=$DIR/dockerd.log
PIDFILE=$DIR/dockerd.pid
log() { echo "dockerd-up: $*" >&2; }

if [[ $(id -u) != 0 ]]; then
  log "needs root (dockerd and apt-get); run with sudo, or point DOCKER_HOST at a daemon you have"
  exit 1
fi

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if ((${#missing[@]})); then
  log "installing ${missing[*]} (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# The client that talks to this daemon: Debian's own (same version), else whatever `docker` is on PATH.
client=/usr/bin/docker
[[ -x $client ]] || client=$(command -v docker || true)
ping() {
  if [[ -n $client ]]; then
    DOCKER_HOST=unix://$SOCK "$client" version >/dev/null 2>&1
  else
    curl -fsS --unix-socket "$SOCK" http://localhost/_ping >/dev/null 2>&1
  fi
}

if [[ -S $SOCK ]] && ping; then
  log "reusing the daemon on $SOCK"
else
  mkdir -p "$DIR/data" "$EXEC_ROOT"
  rm -f "$SOCK" "$PIDFILE"
  log "starting dockerd (data root $DIR/data, log $LOG)"
  # setsid: the daemon outlives this script and the CI step that ran it.
  setsid dockerd \
    --host "unix://$SOCK" \
    --data-root "$DIR/data" \
    --exec-root "$EXEC_ROOT" \
    --pidfile "$PIDFILE" \
    --storage-driver overlay2 \
    >"$LOG" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    if [[ -S $SOCK ]] && ping; then break; fi
    sleep 0.5
  done
  if ! ping; then
    log "dockerd did not come up within 30 s; last lines of $LOG:"
    tail -n 20 "$LOG" >&2 || true
    exit 1
  fi
  log "dockerd ready (pid $(cat "$PIDFILE" 2>/dev/null || echo '?'))"
fi

echo "export DOCKER_HOST=unix://$SOCK"
