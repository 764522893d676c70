#!/usr/bin/env bash
# The driver entry points of issue 24 against the real driver, and the copy rates the sim
# backend's prices come from. Nothing is built on the GPU machine:
#
#   tests/gpu/driver_surface_check.sh build [BUILD_DIR]   here: builds BUILD_DIR (default build)
#       tests/programs/entry_points_program and tests/gpu/peer_copy_bw (nvcc); carry both.
#   tests/gpu/driver_surface_check.sh run [BUILD_DIR]     on the GPU machine (2 GPUs for the peer
#       rows): runs entry_points_program on the real driver (each check states what vgpu's sim
#       backend answers: a FAIL line is a place where the real driver answers otherwise), then on
#       vgpu's passthrough backend, then peer_copy_bw.
#
# Output also goes to $OUT/driver_surface_check.txt when $OUT is set.
set -u
mode=${1:-run}
build=${2:-build}
prog="$build/tests/programs/entry_points_program"
bw="$build/tests/gpu/peer_copy_bw"

if [[ $mode == build ]]; then
  ninja -C "$build" -j 1 tests/programs/entry_points_program || exit 1
  mkdir -p "$build/tests/gpu"
  exec /usr/local/cuda/bin/nvcc -arch=sm_90 -O2 -std=c++17 -o "$bw" tests/gpu/peer_copy_bw.cu
fi

log=/dev/null
[[ -n ${OUT:-} ]] && log="$OUT/driver_surface_check.txt"
{
  echo "== driver_surface_check on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
  real=""
  for d in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [[ -e $d/libcuda.so.1 ]] && real=$d && break
  done
  echo "real driver: ${real:-not found}"
  echo "== entry_points_program on the real driver"
  LD_LIBRARY_PATH="$real:/usr/local/cuda/lib64" "$prog"
  echo "== entry_points_program on vgpu's passthrough backend"
  LD_LIBRARY_PATH="$build/vgpu/passthrough:$real:/usr/local/cuda/lib64" VGPU_REAL_LIBCUDA="$real/libcuda.so.1" "$prog"
  echo "== peer_copy_bw on the real driver"
  LD_LIBRARY_PATH="$real:/usr/local/cuda/lib64" "$bw"
} 2>&1 | tee "$log"
