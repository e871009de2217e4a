#!/usr/bin/env bash
# Build the local base image of the `cpu` arch (docker/arches.yaml: base_image rocmft-base:cpu) without
# any registry: debootstrap a minimal Debian bookworm with Python from the apt mirror this machine
# already uses, and `docker import` it. Needs root, debootstrap and a reachable Docker daemon
# (eval "$(scripts/ci/dockerd-up.sh)" first). Skips when the image already exists (FORCE=1 rebuilds).
#
#   scripts/ci/build-cpu-base.sh [IMAGE]      # default: rocmft-base:cpu
set -euo pipefail

IMAGE=${1:-rocmft-base:cpu}
SUITE=${SUITE:-bookworm}
# python3-venv: Debian's python is externally managed, the image installs into a venv.
# (No ca-certificates: the image build is offline, it installs only from the wheelhouse.)
PACKAGES=${PACKAGES:-python3,python3-venv}
log() { echo "build-cpu-base: $*" >&2; }

docker_cli=/usr/bin/docker
[[ -x $docker_cli ]] || docker_cli=$(command -v docker)
if ! "$docker_cli" version >/dev/null 2>&1; then
  log "no Docker daemon reachable (DOCKER_HOST=${DOCKER_HOST:-unset}); start one: eval \"\$(scripts/ci/dockerd-up.sh)\""
  exit 1
fi
if [[ ${FORCE:-0} != 1 ]] && "$docker_cli" image inspect "$IMAGE" >/dev/null 2>&1; then
  log "$IMAGE already exists; skipping (FORCE=1 rebuilds)"
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || { log "debootstrap is missing: apt-get install -y debootstrap"; exit 1; }

# The mirror this machine's apt uses: deb822 sources first, then the one-line format. Never a guess
# from the internet: CI machines may reach only their configured mirror.
mirror=${MIRROR:-}
if [[ -z $mirror ]]; then
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    mirror=$(awk '/^URIs:/ {print $2}' "$f" | grep -v -- '-security' | grep -m1 '/debian' || true)
    [[ -n $mirror ]] && break
  done
fi
if [[ -z $mirror ]]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
    | awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' | grep '/debian' | head -n1 || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}

work=$(mktemp -d /var/tmp/rocmft-base.XXXXXX)
root=$work/rootfs
# The tree holds device nodes: remove it with rm only (never copy it with tools that read /dev entries).
trap 'rm -rf --one-file-system "$work"' EXIT
log "debootstrap $SUITE minbase + $PACKAGES from $mirror (~1 min)"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  log "debootstrap failed; last lines:"; tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
# Keep the image small: no apt lists or package cache (nothing is apt-installed in the build).
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
log "importing as $IMAGE"
# tar archives device nodes as entries (it does not read them); docker import takes the stream.
tar -C "$root" --numeric-owner -c . | "$docker_cli" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  - "$IMAGE" >/dev/null
log "built $IMAGE ($("$docker_cli" image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
