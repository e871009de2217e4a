#!/usr/bin/env bash
# Entrypoint of the rocmft image: check that this container can use the GPUs the image was built for,
# print the fix for every failure at once, then exec the command.
#
# Checks (ROCm images only):
#   /dev/kfd      present and read/writable        fix: docker run --device=/dev/kfd
#   /dev/dri      present, render nodes usable     fix: docker run --device=/dev/dri
#   group access  the user can open the devices    fix: --group-add video --group-add render (or the GIDs)
#   GPU arch      every visible GPU is the image's fix: build/use the image of that arch
# Skipped when the image's arch is `cpu` or ROCMFT_SKIP_GPU_CHECK=1 (the escape hatch for CPU tests and
# for tools that need no GPU). Exit code 2 when a check fails, before the command runs.
# ROCMFT_CHECK_ROOT (tests only) prefixes /dev and /sys so the checks can run against a fake tree.
set -uo pipefail

image_arch=${ROCMFT_IMAGE_ARCH:-unknown}
root=${ROCMFT_CHECK_ROOT:-}
kfd=$root/dev/kfd
dri=$root/dev/dri
topology=$root/sys/class/kfd/kfd/topology/nodes

# A writable HOME: a container run as a non-root user otherwise inherits HOME=/ (caches fail there).
if [[ -z ${HOME:-} || ! -w ${HOME:-/} ]]; then
  export HOME=/tmp/rocmft-home
  mkdir -p "$HOME" 2>/dev/null || true
fi

skip=0
if [[ $image_arch == cpu || ${ROCMFT_SKIP_GPU_CHECK:-0} == 1 ]]; then
  skip=1
fi

failures=()
fail() { failures+=("$1|$2"); }

# gfx_target_version (decimal major*10000 + minor*100 + stepping) -> gfx name: 90402 -> gfx942,
# 90010 -> gfx90a, 110000 -> gfx1100, 120001 -> gfx1201.
gfx_name() {
  local v=$1
  printf 'gfx%d%d%x\n' $((v / 10000)) $((v / 100 % 100)) $((v % 100))
}

visible_archs() {
  # rocminfo knows the driver's view (and honours ROCR_VISIBLE_DEVICES); sysfs is the fallback. /sys is not
  # namespaced: the topology lists every GPU of the HOST, so a GPU counts only when its render node is in
  # this container (`make train` passes the render nodes of the recipe's arch alone, not an enabled iGPU).
  if [[ -z $root ]] && command -v rocminfo >/dev/null 2>&1; then
    rocminfo 2>/dev/null | awk '/^[[:space:]]*Name:[[:space:]]*gfx[0-9a-f]+/ {print $2}' | sort -u
    return
  fi
  local props v minor
  for props in "$topology"/*/properties; do
    [[ -r $props ]] || continue
    v=$(awk '$1 == "gfx_target_version" {print $2}' "$props")
    minor=$(awk '$1 == "drm_render_minor" {print $2}' "$props")
    if [[ -n $minor && $minor != 0 && ! -e $dri/renderD$minor ]]; then
      continue
    fi
    [[ -n $v && $v != 0 ]] && gfx_name "$v"
  done | sort -u
}

# ROCMFT_ARCHES (set by the launcher from docker/arches.yaml): the arches rocmft builds an image for. An arch
# outside it (a Ryzen iGPU's gfx1036) is never suggested as an image to build.
known_arch() {
  local a
  for a in ${ROCMFT_ARCHES:-}; do
    [[ $a == "$1" ]] && return 0
  done
  return 1
}

check_gpu() {
  local gid
  if [[ ! -e $kfd ]]; then
    fail "/dev/kfd is missing (no ROCm compute device in this container)" \
         "docker run --device=/dev/kfd --device=/dev/dri ... (and check the amdgpu driver on the host: ls -l /dev/kfd)"
  elif [[ ! -r $kfd || ! -w $kfd ]]; then
    gid=$(stat -c %g "$kfd" 2>/dev/null || echo '?')
    fail "/dev/kfd is not readable and writable by uid $(id -u) (groups: $(id -G))" \
         "docker run --group-add video --group-add render, or --group-add $gid (the GID that owns /dev/kfd on the host)"
  fi

  local nodes=()
  if [[ -d $dri ]]; then
    shopt -s nullglob
    nodes=("$dri"/renderD*)
    shopt -u nullglob
  fi
  if [[ ! -d $dri ]]; then
    fail "/dev/dri is missing (no GPU render nodes in this container)" "docker run --device=/dev/dri ..."
  elif ((${#nodes[@]} == 0)); then
    fail "/dev/dri has no renderD* nodes" "docker run --device=/dev/dri (the whole folder, not only card*)"
  else
    local node bad=()
    for node in "${nodes[@]}"; do
      [[ -r $node && -w $node ]] || bad+=("$node")
    done
    if ((${#bad[@]})); then
      gid=$(stat -c %g "${bad[0]}" 2>/dev/null || echo '?')
      fail "${bad[*]#"$root"} not readable and writable by uid $(id -u) (groups: $(id -G))" \
           "docker run --group-add render --group-add video, or --group-add $gid (the GID that owns the render nodes on the host)"
    fi
  fi

  local archs
  archs=$(visible_archs)
  if [[ -z $archs ]]; then
    [[ -e $kfd ]] && fail "no GPU is visible (rocminfo/sysfs list no gfx target)" \
      "check that the host sees the GPUs (rocminfo, make doctor on the host) and the GPUS= selection"
  else
    local a only="give the container only the $image_arch GPUs: make train does by default (GPUS= picks among them); docker run: --device=/dev/kfd --device=/dev/dri/renderD<N> per $image_arch GPU"
    for a in $archs; do
      [[ $a == "$image_arch" ]] && continue
      if known_arch "$a"; then
        fail "a visible GPU is $a, this image is built for $image_arch" \
             "use the $a image: make image ARCH=$a (then ARCH=$a), or $only"
      else
        fail "a visible GPU is $a, which rocmft builds no image for (an integrated GPU?); this image is built for $image_arch" \
             "$only"
      fi
    done
  fi
}

if ((skip == 0)); then
  check_gpu
fi

if ((${#failures[@]})); then
  echo "rocmft: this container cannot use the GPUs the image ($image_arch) was built for:" >&2
  for f in "${failures[@]}"; do
    echo "  error: ${f%%|*}" >&2
    echo "         fix: ${f#*|}" >&2
  done
  echo "  (set ROCMFT_SKIP_GPU_CHECK=1 to run anyway, e.g. for a command that needs no GPU)" >&2
  exit 2
fi

if (($# == 0)); then
  set -- python -m rocmft.image.selfcheck --show /opt/rocmft/selfcheck.json
fi
exec "$@"
